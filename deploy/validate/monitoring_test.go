package validate

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// The monitoring shipped in deploy/monitoring: the alerting rules
// (alerts.yaml, Prometheus's rules file), the same rules as a
// PrometheusRule for the Prometheus Operator (prometheusrule.yaml,
// written from alerts.yaml) and the Grafana dashboard. They are checked
// offline here; that every metric they name is one the services expose is
// checked against a live scrape by test/e2e (TestMonitoringNamesLiveMetrics),
// which finds the names with MetricNameText, whose agreement with the
// PromQL parser is checked here.

// monitoringDir is deploy/monitoring.
var monitoringDir = filepath.Join(repoRoot, "deploy", "monitoring")

// ruleFile is a Prometheus rules file.
type ruleFile struct {
	Groups []ruleGroup `json:"groups"`
}

type ruleGroup struct {
	Name  string `json:"name"`
	Rules []rule `json:"rules"`
}

type rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// severities are the rules' severity labels: page wakes someone, ticket
// waits for working hours.
var severities = []string{"page", "ticket"}

// promqlParser parses expressions as Prometheus does.
var promqlParser = parser.NewParser(parser.Options{})

// loadRules reads alerts.yaml strictly (an unknown key is an error).
func loadRules() (ruleFile, []byte, error) {
	raw, err := os.ReadFile(filepath.Join(monitoringDir, "alerts.yaml"))
	if err != nil {
		return ruleFile{}, nil, err
	}
	var f ruleFile
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		return ruleFile{}, nil, fmt.Errorf("alerts.yaml: %w", err)
	}
	return f, raw, nil
}

// alertTemplateFuncs stand for the functions Prometheus gives annotation
// templates, so that a template naming another fails to parse.
var alertTemplateFuncs = template.FuncMap{
	"humanize": fmt.Sprint, "humanizePercentage": fmt.Sprint, "humanizeDuration": fmt.Sprint,
}

// checkRules checks every rule of f; doc is docs/operations.md, which must
// have a section for each alert (its runbook_url's anchor).
func checkRules(f ruleFile, doc string) (metrics []string, errs []error) {
	seen := map[string]bool{}
	if len(f.Groups) == 0 {
		return nil, []error{errors.New("alerts.yaml: no groups")}
	}
	for _, g := range f.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			errs = append(errs, fmt.Errorf("a group needs a name and rules: %q", g.Name))
		}
		for _, r := range g.Rules {
			at := g.Name + "/" + r.Alert
			if !strings.HasPrefix(r.Alert, "Switchboard") || seen[r.Alert] {
				errs = append(errs, fmt.Errorf("%s: an alert is named Switchboard..., once", at))
			}
			seen[r.Alert] = true
			names, err := exprMetrics(r.Expr)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: expr: %w", at, err))
			}
			metrics = append(metrics, names...)
			if r.For != "" {
				if _, err := model.ParseDuration(r.For); err != nil {
					errs = append(errs, fmt.Errorf("%s: for: %w", at, err))
				}
			}
			if !slices.Contains(severities, r.Labels["severity"]) {
				errs = append(errs, fmt.Errorf("%s: labels.severity %q is not one of %v", at, r.Labels["severity"], severities))
			}
			for _, key := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[key] == "" {
					errs = append(errs, fmt.Errorf("%s: annotations.%s is required", at, key))
				}
			}
			for key, text := range r.Annotations {
				// Prometheus defines these before expanding an annotation.
				const defs = "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$value := .Value}}"
				if _, err := template.New(key).Funcs(alertTemplateFuncs).Parse(defs + text); err != nil {
					errs = append(errs, fmt.Errorf("%s: annotations.%s: %w", at, key, err))
				}
			}
			anchor := "#" + strings.ToLower(r.Alert)
			if !strings.HasSuffix(r.Annotations["runbook_url"], "docs/operations.md"+anchor) {
				errs = append(errs, fmt.Errorf("%s: runbook_url must end in docs/operations.md%s", at, anchor))
			}
			if !strings.Contains(doc, "\n#### "+r.Alert+"\n") {
				errs = append(errs, fmt.Errorf("%s: docs/operations.md has no section \"#### %s\" saying what it means and what to do", at, r.Alert))
			}
		}
	}
	return metrics, errs
}

// exprMetrics parses a PromQL expression and returns the metric names it
// selects.
func exprMetrics(expr string) ([]string, error) {
	e, err := promqlParser.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok && vs.Name != "" {
			names = append(names, vs.Name)
		}
		return nil
	})
	if len(names) == 0 {
		return nil, errors.New("selects no metric by name")
	}
	return names, nil
}

// dashboard is what is checked of a Grafana dashboard.
type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name, Type, Query string
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int    `json:"id"`
		Title      string `json:"title"`
		Type       string `json:"type"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		GridPos struct{ H, W, X, Y int } `json:"gridPos"`
		Targets []struct {
			Expr  string `json:"expr"`
			RefID string `json:"refId"`
		} `json:"targets"`
	} `json:"panels"`
}

// dashboardVariables are what Grafana substitutes before a query reaches
// Prometheus.
var dashboardVariables = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m")

// checkDashboard checks the dashboard's JSON: a Prometheus datasource
// variable every panel uses, panels on the 24-column grid with unique ids,
// and targets whose expressions parse.
func checkDashboard(raw []byte) (metrics []string, errs []error) {
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, []error{fmt.Errorf("grafana-dashboard.json: %w", err)}
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		errs = append(errs, errors.New("grafana-dashboard.json: a title, a uid and panels are required"))
	}
	if len(d.Templating.List) == 0 || d.Templating.List[0].Name != "datasource" || d.Templating.List[0].Type != "datasource" || d.Templating.List[0].Query != "prometheus" {
		errs = append(errs, errors.New("grafana-dashboard.json: the first variable must be datasource, of type datasource, query prometheus"))
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		at := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if ids[p.ID] || p.ID == 0 {
			errs = append(errs, fmt.Errorf("%s: ids are unique and not 0", at))
		}
		ids[p.ID] = true
		if p.Datasource.UID != "${datasource}" {
			errs = append(errs, fmt.Errorf("%s: datasource uid must be ${datasource}", at))
		}
		if g := p.GridPos; g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			errs = append(errs, fmt.Errorf("%s: gridPos %+v is off the 24-column grid", at, g))
		}
		if len(p.Targets) == 0 {
			errs = append(errs, fmt.Errorf("%s: no targets", at))
		}
		for _, t := range p.Targets {
			names, err := exprMetrics(dashboardVariables.Replace(t.Expr))
			if err != nil {
				errs = append(errs, fmt.Errorf("%s target %s: %w", at, t.RefID, err))
			}
			metrics = append(metrics, names...)
		}
	}
	return metrics, errs
}

// prometheusRule is alerts.yaml as a PrometheusRule of the Prometheus
// Operator.
func prometheusRule(rules []byte) ([]byte, error) {
	var f map[string]any
	if err := yaml.Unmarshal(rules, &f); err != nil {
		return nil, err
	}
	obj := map[string]any{
		"apiVersion": "monitoring.coreos.com/v1",
		"kind":       "PrometheusRule",
		"metadata": map[string]any{
			"name":   "switchboard",
			"labels": map[string]any{"app.kubernetes.io/name": "switchboard", "app.kubernetes.io/component": "monitoring"},
		},
		"spec": map[string]any{"groups": f["groups"]},
	}
	out, err := yaml.Marshal(obj)
	if err != nil {
		return nil, err
	}
	header := "# The alerting rules of alerts.yaml as a PrometheusRule for the Prometheus\n" +
		"# Operator. Written from alerts.yaml by make monitoring; do not edit.\n"
	return append([]byte(header), out...), nil
}

// metricNameText finds metric names in text as test/e2e does
// (TestMonitoringNamesLiveMetrics): Switchboard's metric names are the
// only words of the form switchboard_... in the monitoring files.
var metricNameText = regexp.MustCompile(`\bswitchboard_[a-z0-9_]+`)

// TestMonitoring checks the alerting rules, their PrometheusRule and the
// dashboard, and that the metric names test/e2e finds in them by text are
// the ones the PromQL parser finds.
func TestMonitoring(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	rules, rulesRaw, err := loadRules()
	if err != nil {
		t.Fatal(err)
	}
	ruleMetrics, errs := checkRules(rules, string(doc))
	dashRaw, err := os.ReadFile(filepath.Join(monitoringDir, "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	dashMetrics, dashErrs := checkDashboard(dashRaw)
	for _, err := range append(errs, dashErrs...) {
		t.Error(err)
	}

	parsed := slices.Compact(slices.Sorted(slices.Values(append(ruleMetrics, dashMetrics...))))
	byText := slices.Compact(slices.Sorted(slices.Values(append(metricNameText.FindAllString(string(rulesRaw), -1), metricNameText.FindAllString(string(dashRaw), -1)...))))
	if !slices.Equal(parsed, byText) {
		t.Errorf("the metric names found by text (test/e2e's way) differ from the parser's:\n text   %v\n parser %v", byText, parsed)
	}

	want, err := prometheusRule(rulesRaw)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(monitoringDir, "prometheusrule.yaml")
	if *updateSchema { // -update: make monitoring
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Error("deploy/monitoring/prometheusrule.yaml is not alerts.yaml's rules: run make monitoring")
	}
}

// TestMonitoringChecksCatchMistakes: each check fails on the mistake it is
// for.
func TestMonitoringChecksCatchMistakes(t *testing.T) {
	good := rule{Alert: "SwitchboardX", Expr: "up == 0", For: "5m", Labels: map[string]string{"severity": "page"},
		Annotations: map[string]string{"summary": "s", "description": "{{ $value | humanize }}", "runbook_url": "https://x/docs/operations.md#switchboardx"}}
	doc := "\n#### SwitchboardX\n"
	if _, errs := checkRules(ruleFile{Groups: []ruleGroup{{Name: "g", Rules: []rule{good}}}}, doc); len(errs) != 0 {
		t.Fatalf("a good rule: %v", errs)
	}
	for name, mutate := range map[string]func(r *rule){
		"bad PromQL":        func(r *rule) { r.Expr = "rate(up[5m)" },
		"no metric":         func(r *rule) { r.Expr = "vector(1)" },
		"bad for":           func(r *rule) { r.For = "five minutes" },
		"no severity":       func(r *rule) { delete(r.Labels, "severity") },
		"unknown function":  func(r *rule) { r.Annotations["description"] = "{{ $value | humanise }}" },
		"no runbook":        func(r *rule) { delete(r.Annotations, "runbook_url") },
		"undocumented":      func(r *rule) { r.Alert = "SwitchboardY" },
		"not Switchboard's": func(r *rule) { r.Alert = "HighErrors" },
	} {
		r := good
		r.Labels, r.Annotations = maps.Clone(good.Labels), maps.Clone(good.Annotations)
		mutate(&r)
		if _, errs := checkRules(ruleFile{Groups: []ruleGroup{{Name: "g", Rules: []rule{r}}}}, doc); len(errs) == 0 {
			t.Errorf("%s: no error", name)
		}
	}
	for name, text := range map[string]string{
		"not JSON":         `{`,
		"bad expr":         `{"title":"t","uid":"u","templating":{"list":[{"name":"datasource","type":"datasource","query":"prometheus"}]},"panels":[{"id":1,"datasource":{"uid":"${datasource}"},"gridPos":{"h":8,"w":12,"x":0,"y":0},"targets":[{"expr":"sum(","refId":"A"}]}]}`,
		"off the grid":     `{"title":"t","uid":"u","templating":{"list":[{"name":"datasource","type":"datasource","query":"prometheus"}]},"panels":[{"id":1,"datasource":{"uid":"${datasource}"},"gridPos":{"h":8,"w":30,"x":0,"y":0},"targets":[{"expr":"up","refId":"A"}]}]}`,
		"no datasource":    `{"title":"t","uid":"u","templating":{"list":[]},"panels":[{"id":1,"datasource":{"uid":"${datasource}"},"gridPos":{"h":8,"w":12,"x":0,"y":0},"targets":[{"expr":"up","refId":"A"}]}]}`,
		"fixed datasource": `{"title":"t","uid":"u","templating":{"list":[{"name":"datasource","type":"datasource","query":"prometheus"}]},"panels":[{"id":1,"datasource":{"uid":"prom-1"},"gridPos":{"h":8,"w":12,"x":0,"y":0},"targets":[{"expr":"up","refId":"A"}]}]}`,
	} {
		if _, errs := checkDashboard([]byte(text)); len(errs) == 0 {
			t.Errorf("dashboard %s: no error", name)
		}
	}
}
