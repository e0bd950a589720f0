// Package promql finds the metric names a PromQL expression reads, and the expressions
// of a Prometheus rule file and a Grafana dashboard, so that tests can check that every
// alert and panel reads metrics the processes export. It is a lexer, not a parser: it
// knows enough of the syntax to tell metric names from functions, keywords, label names,
// strings, durations and Grafana's $variables.
package promql

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// keywords are the words of PromQL that are not metric names where a name could stand.
var keywords = map[string]bool{
	"and": true, "or": true, "unless": true, "by": true, "without": true, "on": true, "ignoring": true,
	"group_left": true, "group_right": true, "bool": true, "offset": true, "inf": true, "nan": true,
	"sum": true, "avg": true, "min": true, "max": true, "count": true, "stddev": true, "stdvar": true,
	"topk": true, "bottomk": true, "quantile": true, "count_values": true, "group": true,
}

// labelLists are the keywords followed by a parenthesised list of label names.
var labelLists = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

func isNameStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isNameChar(c byte) bool { return isNameStart(c) || c >= '0' && c <= '9' }

// Metrics returns the metric names expr reads, sorted and each once.
//
//nolint:gocyclo // above the limit of 15, to be split (issue 35)
func Metrics(expr string) ([]string, error) {
	var names []string
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(expr, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '{':
			// Label matchers: names, operators and quoted values.
			for i++; i < len(expr) && expr[i] != '}'; i++ {
				if q := expr[i]; q == '"' || q == '\'' || q == '`' {
					end, err := skipString(expr, i)
					if err != nil {
						return nil, err
					}
					i = end - 1
				}
			}
			if i == len(expr) {
				return nil, fmt.Errorf("promql: unclosed { in %q", expr)
			}
			i++
		case c == '[':
			// A range or subquery duration.
			end := strings.IndexByte(expr[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("promql: unclosed [ in %q", expr)
			}
			i += end + 1
		case c == '$':
			// A Grafana variable ($__rate_interval, ${instance}).
			for i++; i < len(expr) && (isNameChar(expr[i]) || expr[i] == '{' || expr[i] == '}'); i++ {
			}
		case c >= '0' && c <= '9' || c == '.':
			// A number (1.5, 2e3, 0x1f) or a duration (5m).
			for i++; i < len(expr) && (isNameChar(expr[i]) || expr[i] == '.'); i++ {
			}
		case isNameStart(c):
			start := i
			for i < len(expr) && isNameChar(expr[i]) {
				i++
			}
			word := expr[start:i]
			next := i
			for next < len(expr) && (expr[next] == ' ' || expr[next] == '\n' || expr[next] == '\t' || expr[next] == '\r') {
				next++
			}
			switch {
			case labelLists[strings.ToLower(word)]:
				if next < len(expr) && expr[next] == '(' {
					end := strings.IndexByte(expr[next:], ')')
					if end < 0 {
						return nil, fmt.Errorf("promql: unclosed ( after %s in %q", word, expr)
					}
					i = next + end + 1
				}
			case keywords[strings.ToLower(word)]:
			case next < len(expr) && expr[next] == '(':
				// A function call.
			default:
				if !slices.Contains(names, word) {
					names = append(names, word)
				}
			}
		default:
			i++
		}
	}
	slices.Sort(names)
	return names, nil
}

func skipString(expr string, i int) (int, error) {
	q := expr[i]
	for j := i + 1; j < len(expr); j++ {
		switch {
		case expr[j] == '\\' && q != '`':
			j++
		case expr[j] == q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("promql: unclosed string in %q", expr)
}

// BaseName is the family a series name belongs to: a histogram's or summary's _bucket,
// _sum and _count series belong to the name without the suffix.
func BaseName(name string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			return base
		}
	}
	return name
}

// Rule is one alerting or recording rule of a rule file.
type Rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// Rules reads a Prometheus rule file.
func Rules(file []byte) ([]Rule, error) {
	var doc struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []Rule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(file, &doc); err != nil {
		return nil, fmt.Errorf("promql: rules: %w", err)
	}
	var rules []Rule
	for _, g := range doc.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules, nil
}

// Panel is a Grafana panel with its queries.
type Panel struct {
	Title   string `json:"title"`
	Type    string `json:"type"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
	Panels []Panel `json:"panels"` // a collapsed row's panels
}

// DashboardPanels reads a Grafana dashboard's panels, those of collapsed rows included.
func DashboardPanels(file []byte) ([]Panel, error) {
	var doc struct {
		Panels []Panel `json:"panels"`
	}
	if err := json.Unmarshal(file, &doc); err != nil {
		return nil, fmt.Errorf("promql: dashboard: %w", err)
	}
	var all []Panel
	var walk func([]Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			all = append(all, p)
			walk(p.Panels)
		}
	}
	walk(doc.Panels)
	return all, nil
}
