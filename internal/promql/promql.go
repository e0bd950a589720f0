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
func Metrics(expr string) ([]string, error) {
	var names []string
	for i := 0; i < len(expr); {
		next, metric, err := token(expr, i)
		if err != nil {
			return nil, err
		}
		if metric != "" && !slices.Contains(names, metric) {
			names = append(names, metric)
		}
		i = next
	}
	slices.Sort(names)
	return names, nil
}

// token reads the token of expr that starts at i, and returns where the next one starts
// and the token's metric name, if it is one.
func token(expr string, i int) (next int, metric string, err error) {
	c := expr[i]
	switch {
	case isQuote(c):
		next, err = skipString(expr, i)
		return next, "", err
	case c == '{':
		next, err = skipMatchers(expr, i)
		return next, "", err
	case c == '[':
		// A range or subquery duration.
		end := strings.IndexByte(expr[i:], ']')
		if end < 0 {
			return 0, "", fmt.Errorf("promql: unclosed [ in %q", expr)
		}
		return i + end + 1, "", nil
	case c == '$':
		// A Grafana variable ($__rate_interval, ${instance}).
		return skipWhile(expr, i+1, isVariableChar), "", nil
	case c >= '0' && c <= '9' || c == '.':
		// A number (1.5, 2e3, 0x1f) or a duration (5m).
		return skipWhile(expr, i+1, isNumberChar), "", nil
	case isNameStart(c):
		return word(expr, i)
	}
	return i + 1, "", nil
}

// skipMatchers returns where the label matchers that open at i end: their names,
// operators and quoted values.
func skipMatchers(expr string, i int) (int, error) {
	for i++; i < len(expr) && expr[i] != '}'; i++ {
		if isQuote(expr[i]) {
			end, err := skipString(expr, i)
			if err != nil {
				return 0, err
			}
			i = end - 1
		}
	}
	if i == len(expr) {
		return 0, fmt.Errorf("promql: unclosed { in %q", expr)
	}
	return i + 1, nil
}

// word reads the name that starts at i, and returns where the next token starts and the
// name if it is a metric's: not a keyword, nor a function's name. After the keywords of a
// label list (by, on, …) the list is skipped.
func word(expr string, i int) (next int, metric string, err error) {
	end := skipWhile(expr, i, isNameChar)
	w := expr[i:end]
	after := skipWhile(expr, end, isSpace)
	switch {
	case labelLists[strings.ToLower(w)]:
		if after < len(expr) && expr[after] == '(' {
			closing := strings.IndexByte(expr[after:], ')')
			if closing < 0 {
				return 0, "", fmt.Errorf("promql: unclosed ( after %s in %q", w, expr)
			}
			return after + closing + 1, "", nil
		}
	case keywords[strings.ToLower(w)]:
	case after < len(expr) && expr[after] == '(':
		// A function call.
	default:
		return end, w, nil
	}
	return end, "", nil
}

// skipWhile returns the index of the first byte of expr from i on that ok refuses, or
// len(expr).
func skipWhile(expr string, i int, ok func(byte) bool) int {
	for i < len(expr) && ok(expr[i]) {
		i++
	}
	return i
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }

func isQuote(c byte) bool { return c == '"' || c == '\'' || c == '`' }

// isVariableChar is a byte of a Grafana variable's name after its $, braces included.
func isVariableChar(c byte) bool { return isNameChar(c) || c == '{' || c == '}' }

// isNumberChar is a byte of a number or a duration after its first.
func isNumberChar(c byte) bool { return isNameChar(c) || c == '.' }

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
