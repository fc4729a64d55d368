//lint:file-ignore SA1019 the SDK deprecates its dashboard v1 types for the v2 resource, another format (elements and layouts, behind Grafana 12 feature flags); this dashboard is the classic JSON model every Grafana imports, which the v1 types are

package main

// The checks that need no Prometheus: the dashboard decoded strictly into
// Grafana's own dashboard model (the Apache-licensed foundation SDK's
// types, generated from Grafana's schema), every panel and query on the
// dashboard's Prometheus data source variable, every variable it uses
// declared, and a layout Grafana lays out as written.

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
)

// gridColumns is the width of Grafana's dashboard grid.
const gridColumns = 24

// Query is a PromQL expression of the dashboard: a panel's target or a
// query variable's selector, named for messages and for promtool.
type Query struct {
	// Where says where it is, for messages ("panel 2 \"Runtime
	// connected\" target A").
	Where string
	// Record is a recording rule name that stands for it in the rules
	// file given to promtool.
	Record string
	// Expr is the expression as written, Grafana's variables and all.
	Expr string
}

// Result is what Check found.
type Result struct {
	Problems []string
	Queries  []Query
	// Panels counts the panels checked (not rows).
	Panels int
	// Variables are the dashboard's template variables by name.
	Variables map[string]dashboard.VariableModel
}

func (r *Result) problem(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// grafanaVariable matches the three ways a dashboard refers to a variable:
// $name, ${name} or ${name:format}, and [[name]].
var grafanaVariable = regexp.MustCompile(`\$([A-Za-z_][A-Za-z0-9_]*)|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:[:.][^}]*)?\}|\[\[([A-Za-z_][A-Za-z0-9_]*)(?::[^\]]*)?\]\]`)

// builtinVariables are Grafana's global variables, which every dashboard
// has (docs: "Global variables").
var builtinVariables = []string{
	"__interval", "__interval_ms", "__rate_interval", "__rate_interval_ms", "__range", "__range_s", "__range_ms",
	"__from", "__to", "__dashboard", "__name", "__org", "__user", "__timezone", "__all", "timeFilter", "__timeFilter",
}

// labelValues is the Prometheus data source's variable query
// label_values(SELECTOR, LABEL), whose selector is PromQL.
var labelValues = regexp.MustCompile(`^\s*label_values\(\s*(.+?)\s*,\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$`)

// Check decodes a dashboard's JSON and checks it; the queries it returns
// are still to be parsed (CheckPromQL).
func Check(raw []byte) (*Result, error) {
	plugins.RegisterDefaultPlugins()
	res := &Result{Variables: map[string]dashboard.VariableModel{}}
	// The SDK's strict decoders report every problem, but, in v0.0.22,
	// return an empty error list where they mean nil, and their callers
	// then drop what they decoded (every panel, every target): the strict
	// decoding is the schema check, the lenient one the model checked next.
	var strict dashboard.Dashboard
	if err := strictErr(strict.UnmarshalJSONStrict(raw)); err != nil {
		var build cog.BuildErrors
		if !errors.As(err, &build) {
			return nil, fmt.Errorf("not a dashboard's JSON: %w", err)
		}
		for _, e := range build {
			res.problem("Grafana's dashboard schema: %s", e)
		}
		return res, nil
	}
	var d dashboard.Dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("not a dashboard's JSON: %w", err)
	}
	if err := strictErr(d.Validate()); err != nil {
		res.problem("Grafana's dashboard schema: %v", err)
	}
	checkFieldConfigs(raw, res)

	ds := checkVariables(&d, res)
	ids := map[uint32]string{}
	for i, pr := range d.Panels {
		switch {
		case pr.RowPanel != nil:
			row := pr.RowPanel
			where := fmt.Sprintf("row %d %q", row.Id, deref(row.Title))
			noteID(res, ids, row.Id, where)
			checkGrid(res, where, row.GridPos)
			for j := range row.Panels {
				checkPanel(res, ids, ds, &row.Panels[j])
			}
		case pr.Panel != nil:
			checkPanel(res, ids, ds, pr.Panel)
		default:
			res.problem("panels[%d]: neither a panel nor a row", i)
		}
	}
	return res, nil
}

// strictErr is err, or nil for the SDK's empty list of errors (its strict
// decoders return their error list even when it is empty).
func strictErr(err error) error {
	var build cog.BuildErrors
	if errors.As(err, &build) && len(build) == 0 {
		return nil
	}
	return err
}

// checkVariables checks the template variables and returns the name of
// the Prometheus data source variable ("" when there is none).
func checkVariables(d *dashboard.Dashboard, res *Result) string {
	var ds string
	if len(d.Templating.List) == 0 {
		res.problem("no template variables: the dashboard needs a Prometheus data source variable (type datasource, query prometheus), so that it works whatever its data source is called")
		return ""
	}
	for _, v := range d.Templating.List {
		if _, dup := res.Variables[v.Name]; dup {
			res.problem("variable %s is declared twice", v.Name)
		}
		res.Variables[v.Name] = v
	}
	for _, v := range d.Templating.List {
		where := "variable " + v.Name
		switch v.Type {
		case dashboard.VariableTypeDatasource:
			if q := queryString(v.Query); q != "prometheus" {
				res.problem("%s: a data source variable of type %q; the dashboard's queries are PromQL: write query \"prometheus\"", where, q)
				continue
			}
			if ds != "" {
				res.problem("%s: a second Prometheus data source variable (the first is %s)", where, ds)
			}
			ds = v.Name
		case dashboard.VariableTypeQuery:
			q := queryString(v.Query)
			m := labelValues.FindStringSubmatch(q)
			if m == nil {
				res.problem("%s: query %q is not label_values(SELECTOR, LABEL)", where, q)
				continue
			}
			if v.Definition != nil && *v.Definition != q {
				res.problem("%s: definition %q is not its query %q (Grafana shows the one and runs the other)", where, *v.Definition, q)
			}
			res.Queries = append(res.Queries, Query{Where: where, Record: "dashboard:variable_" + v.Name, Expr: m[1]})
			checkUses(res, where, q)
		}
	}
	if ds == "" {
		res.problem("no Prometheus data source variable (type datasource, query prometheus): every panel must name one")
		return ""
	}
	for _, v := range d.Templating.List {
		if v.Type == dashboard.VariableTypeQuery {
			checkDatasource(res, "variable "+v.Name, ds, v.Datasource, true)
		}
	}
	return ds
}

// queryString is a variable's query as text: a string, or a query
// object's "query".
func queryString(q *dashboard.StringOrMap) string {
	switch {
	case q == nil:
		return ""
	case q.String != nil:
		return *q.String
	default:
		s, _ := q.Map["query"].(string)
		return s
	}
}

func checkPanel(res *Result, ids map[uint32]string, ds string, p *dashboard.Panel) {
	res.Panels++
	where := fmt.Sprintf("panel %s %q", idText(p.Id), deref(p.Title))
	if p.Id == nil {
		res.problem("%s: no id (Grafana links, embeds and alerts refer to a panel by it)", where)
	} else {
		noteID(res, ids, *p.Id, where)
	}
	checkGrid(res, where, p.GridPos)
	if p.Type != "row" {
		if _, ok := cog.ConfigForPanelcfgVariant(p.Type); !ok {
			res.problem("%s: panel type %q is none of those Grafana's schema models (the foundation SDK's), so its options were not checked", where, p.Type)
		}
	}
	checkUses(res, where, deref(p.Title))
	checkDatasource(res, where, ds, p.Datasource, true)
	if len(p.Targets) == 0 {
		res.problem("%s: no query", where)
	}
	refIDs := map[string]bool{}
	for i, t := range p.Targets {
		q, ok := t.(*prometheus.Dataquery)
		if !ok {
			res.problem("%s: target %d is a %s query, not Prometheus'", where, i, t.DataqueryType())
			continue
		}
		ref := deref(q.RefId)
		tw := fmt.Sprintf("%s target %s", where, ref)
		if ref == "" || refIDs[ref] {
			res.problem("%s: target %d has no refId or the one of another target (%q)", where, i, ref)
		}
		refIDs[ref] = true
		checkDatasource(res, tw, ds, q.Datasource, false)
		if strings.TrimSpace(q.Expr) == "" {
			res.problem("%s: an empty expression", tw)
			continue
		}
		checkUses(res, tw, q.Expr)
		checkUses(res, tw, deref(q.LegendFormat))
		res.Queries = append(res.Queries, Query{Where: tw, Record: fmt.Sprintf("dashboard:panel_%s_%s", idText(p.Id), ref), Expr: q.Expr})
	}
}

// checkDatasource: ref is the Prometheus data source variable; absent is
// fine only where it inherits the panel's (a target).
func checkDatasource(res *Result, where, ds string, ref *common.DataSourceRef, required bool) {
	if ref == nil {
		if required {
			res.problem("%s: no datasource; write {\"type\": \"prometheus\", \"uid\": \"${%s}\"}", where, ds)
		}
		return
	}
	if deref(ref.Type) != "prometheus" || deref(ref.Uid) != "${"+ds+"}" {
		res.problem("%s: datasource {type %q, uid %q}; write {\"type\": \"prometheus\", \"uid\": \"${%s}\"}, the dashboard's data source variable", where, deref(ref.Type), deref(ref.Uid), ds)
	}
}

// checkUses: every variable text refers to is declared or Grafana's own.
func checkUses(res *Result, where, text string) {
	for _, m := range grafanaVariable.FindAllStringSubmatch(text, -1) {
		name := m[1] + m[2] + m[3]
		if _, ok := res.Variables[name]; ok || slices.Contains(builtinVariables, name) {
			continue
		}
		res.problem("%s: uses variable $%s, which the dashboard does not declare (templating.list) and Grafana does not define", where, name)
	}
}

func noteID(res *Result, ids map[uint32]string, id uint32, where string) {
	if other, dup := ids[id]; dup {
		res.problem("%s: id %d is also %s's", where, id, other)
	}
	ids[id] = where
}

func checkGrid(res *Result, where string, g *dashboard.GridPos) {
	switch {
	case g == nil:
		res.problem("%s: no gridPos", where)
	case g.W == 0 || g.H == 0:
		res.problem("%s: gridPos w %d, h %d: a panel Grafana can show is at least 1 by 1", where, g.W, g.H)
	case g.X+g.W > gridColumns:
		res.problem("%s: gridPos x %d + w %d is past the grid's %d columns", where, g.X, g.W, gridColumns)
	}
}

// checkFieldConfigs decodes each panel's fieldConfig strictly: the SDK's
// panel decoder is strict for its custom part only.
func checkFieldConfigs(raw []byte, res *Result) {
	type rawPanel struct {
		ID          *uint32           `json:"id"`
		Title       string            `json:"title"`
		FieldConfig json.RawMessage   `json:"fieldConfig"`
		Panels      []json.RawMessage `json:"panels"`
	}
	var top struct {
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		res.problem("panels: %v", err)
		return
	}
	var walk func([]json.RawMessage)
	walk = func(panels []json.RawMessage) {
		for _, pr := range panels {
			var p rawPanel
			if err := json.Unmarshal(pr, &p); err != nil {
				res.problem("panels: %v", err)
				continue
			}
			if p.FieldConfig != nil {
				var fc dashboard.FieldConfigSource
				if err := strictErr(fc.UnmarshalJSONStrict(p.FieldConfig)); err != nil {
					res.problem("panel %s %q: Grafana's dashboard schema: fieldConfig.%v", idText(p.ID), p.Title, err)
				}
			}
			walk(p.Panels)
		}
	}
	walk(top.Panels)
}

func idText(id *uint32) string {
	if id == nil {
		return "?"
	}
	return fmt.Sprint(*id)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
