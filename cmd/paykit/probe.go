package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// runProbe is `paykit probe <url>`: a GET that succeeds on a 2xx answer within timeout.
// The image holds the paykit binary only (no shell, no curl), so Docker Compose's health
// checks call it on the admin listener's /readyz.
func runProbe(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %s: %s", url, resp.Status, body)
	}
	return nil
}
