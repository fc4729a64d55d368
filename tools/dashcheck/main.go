// Command dashcheck checks Grafana dashboards (deploy/monitoring) as far as
// it can without a Grafana, which is AGPL and not run here:
//
//   - the JSON decodes strictly into Grafana's dashboard model, the types
//     of github.com/grafana/grafana-foundation-sdk/go generated from
//     Grafana's schema: an unknown or misspelt field anywhere it models (the
//     dashboard, panels, each panel type's options and custom field config,
//     field configs, Prometheus queries, variables) and a required one left
//     out are errors, and so is a panel type Grafana does not have;
//   - every panel and query variable uses the dashboard's Prometheus data
//     source variable (type datasource, query prometheus), and every query
//     is a Prometheus one;
//   - every variable an expression, legend or title uses is declared or one
//     of Grafana's own;
//   - panel ids and each panel's refIds are unique, and panels fit the
//     24-column grid;
//   - every expression, its variables replaced as Grafana replaces them,
//     parses with Prometheus' parser (promtool check rules, -promtool).
//
// That the metrics the expressions name are ones the daemon exports is
// docscheck's check (tools/docscheck, -monitoring). Not checked: how
// Grafana renders the panels, and that the queries return data.
//
// Usage: go run ./tools/dashcheck -promtool PROMTOOL DASHBOARD.json...
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	promtool := flag.String("promtool", "", "promtool, to parse the expressions (make lint passes its PROMTOOL); empty: the expressions are not parsed")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: dashcheck [-promtool PROMTOOL] DASHBOARD.json...")
		os.Exit(2)
	}
	failed := false
	for _, path := range flag.Args() {
		problems, summary, err := checkFile(path, *promtool)
		if err != nil {
			fmt.Fprintf(os.Stderr, "dashcheck: %s: %v\n", path, err)
			os.Exit(1)
		}
		for _, p := range problems {
			fmt.Fprintf(os.Stderr, "%s: %s\n", path, p)
		}
		if len(problems) > 0 {
			failed = true
			continue
		}
		fmt.Printf("dashcheck: %s: ok: %s\n", path, summary)
	}
	if failed {
		os.Exit(1)
	}
}

// checkFile checks one dashboard and says what it checked.
func checkFile(path, promtool string) (problems []string, summary string, err error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	res, err := Check(raw)
	if err != nil {
		return nil, "", err
	}
	problems = res.Problems
	parsed := "not parsed (no -promtool)"
	if promtool != "" && len(res.Queries) > 0 {
		more, err := CheckPromQL(promtool, res.Queries, res.Variables)
		if err != nil {
			return nil, "", err
		}
		problems = append(problems, more...)
		parsed = "parsed by " + promtool
	}
	summary = fmt.Sprintf("Grafana's schema (strict), %d panels on the Prometheus data source variable, %d variables, %d expressions %s",
		res.Panels, len(res.Variables), len(res.Queries), parsed)
	return problems, summary, nil
}
