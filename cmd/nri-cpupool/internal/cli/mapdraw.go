package cli

// The node map's drawing (see nodemap.go): the laid-out cells (maplayout.go)
// become lines, the summary, the nested boxes with their cores, the key of
// marks and the legend of owner labels, in plain or box-drawing
// characters and with or without colour (mapLook), which change how cells
// look, never where they are.

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/plural"
	"github.com/cpupool/nri-cpupool/pools"
)

// mapLook is how the map is drawn, never what it shows.
type mapLook struct {
	width int  // columns to fit in; at least one core a row whatever it is
	color bool // ANSI colours
	utf8  bool // box-drawing characters instead of ASCII
}

// glyphs are the characters of the boxes and of a free cell.
type glyphs struct{ h, v, tl, tr, bl, br, free string }

func (l mapLook) glyphs() glyphs {
	if l.utf8 {
		return glyphs{"─", "│", "┌", "┐", "└", "┘", "·"}
	}
	return glyphs{"-", "|", "+", "+", "+", "+", "."}
}

// poolLetter is a pool's one-character name in the cells.
func poolLetter(pool string) string {
	switch pool {
	case pools.Exclusive:
		return "e"
	case pools.Shared:
		return "s"
	case pools.Infra:
		return "i"
	case pools.ExclusiveNonIsolcpus:
		return "n"
	case "":
		return "-"
	}
	return "?" // a pool of a newer plugin than this command
}

// summary is the line above the boxes, and the offline CPUs they leave out.
func (d *drawing) summary() []mapLine {
	t := d.m.topo
	s := fmt.Sprintf("%s online: %s, %s, %s, %s", plural.Count(t.Online.Size(), "CPU"), plural.Count(len(t.Sockets()), "socket"),
		plural.Count(len(t.NUMANodes), "NUMA node"), plural.Count(len(t.L3Groups()), "L3 group"), plural.Count(t.Cores(), "core"))
	fewest := d.threads
	d.tree.walkCores(func(threads []int) { fewest = min(fewest, len(threads)) })
	switch {
	case fewest != d.threads:
		s += fmt.Sprintf(" of up to %d threads", d.threads)
	case d.threads > 1:
		s += fmt.Sprintf(" of %d threads", d.threads)
	}
	var lines []mapLine
	for _, l := range wrapAfterCommas(s, d.look.width) {
		lines = append(lines, line(l, styleTitle))
	}
	if !t.Offline.IsEmpty() {
		for _, l := range wrapAfterCommas("offline, not drawn: "+t.Offline.String(), d.look.width) {
			lines = append(lines, line(l, stylePlain))
		}
	}
	return lines
}

// wrapAfterCommas breaks s after commas into lines of at most width
// columns, the later ones indented: a sparse node's summary and its list
// of offline CPUs outgrow 80 columns. A piece wider than width alone
// stays whole.
func wrapAfterCommas(s string, width int) []string {
	if width <= 0 || utf8.RuneCountInString(s) <= width {
		return []string{s}
	}
	var out []string
	cur := ""
	for _, piece := range strings.SplitAfter(s, ",") {
		if cur != "" && utf8.RuneCountInString(strings.TrimRight(cur+piece, " ")) > width {
			out = append(out, strings.TrimRight(cur, " "))
			cur = "  " + strings.TrimLeft(piece, " ")
			continue
		}
		cur += piece
	}
	return append(out, cur)
}

// boxes draws the groups of the node, each top-level group a box.
func (d *drawing) boxes() []mapLine {
	var out []mapLine
	for _, g := range d.tree.children {
		out = append(out, d.group(g, d.tree.width)...)
	}
	return out
}

// group draws a group that is a box: its title in the top border, and in
// it either its rows of cores or its children, boxes or headed rows.
func (d *drawing) group(g *mapGroup, outer int) []mapLine {
	if g.leaf() {
		return d.box(g.title, outer, d.rows(g, ""))
	}
	var body []mapLine
	for _, c := range g.children {
		if c.leaf() {
			body = append(body, line(c.title, styleTitle))
			body = append(body, d.rows(c, "  ")...)
		} else {
			body = append(body, d.group(c, outer-4)...)
		}
	}
	return d.box(g.title, outer, body)
}

// box frames body, whose lines are at most outer-4 wide.
func (d *drawing) box(title string, outer int, body []mapLine) []mapLine {
	g := d.g
	top := mapLine{{g.tl + g.h + " ", styleBorder}, {title, styleTitle},
		{" " + strings.Repeat(g.h, max(1, outer-5-len(title))) + g.tr, styleBorder}}
	out := []mapLine{top}
	for _, l := range body {
		row := mapLine{{g.v + " ", styleBorder}}
		row = append(row, l...)
		row = append(row, span{strings.Repeat(" ", max(0, outer-4-l.width())) + " ", stylePlain}, span{g.v, styleBorder})
		out = append(out, row)
	}
	return append(out, mapLine{{g.bl + strings.Repeat(g.h, outer-2) + g.br, styleBorder}})
}

// rows draws a leaf group's cores, perRow of them a row.
func (d *drawing) rows(g *mapGroup, indent string) []mapLine {
	var out []mapLine
	for start := 0; start < len(g.cores); start += g.perRow {
		row := mapLine{{indent, stylePlain}}
		for i, threads := range g.cores[start:min(start+g.perRow, len(g.cores))] {
			if i > 0 {
				row = append(row, span{strings.Repeat(" ", d.gap()), stylePlain})
			}
			row = append(row, d.core(threads)...)
		}
		out = append(out, row)
	}
	return out
}

// core draws a core: its threads' cells, between brackets on SMT nodes,
// padded to the most threads a core has here (an offline sibling leaves a
// gap).
func (d *drawing) core(threads []int) mapLine {
	if d.threads <= 1 {
		return d.cell(threads[0])
	}
	l := mapLine{{"[", stylePlain}}
	for i := range d.threads {
		if i > 0 {
			l = append(l, span{" ", stylePlain})
		}
		if i < len(threads) {
			l = append(l, d.cell(threads[i])...)
		} else {
			l = append(l, span{strings.Repeat(" ", d.cellW), stylePlain})
		}
	}
	return append(l, span{"]", stylePlain})
}

// cell draws one CPU: id, pool letter, owner, marks.
func (d *drawing) cell(id int) mapLine {
	c := d.cells[id]
	s := fmt.Sprintf("%*d", d.idW, id)
	if d.m.pools != nil || d.m.showOwners {
		s += " " + poolLetter(c.pool)
	}
	if d.m.showOwners {
		s += fmt.Sprintf("%-*s", d.labelW, d.ownerText(c))
	}
	l := mapLine{{s, d.cellStyle(c)}}
	if len(c.marks) > 0 {
		var m strings.Builder
		for i, has := range c.marks {
			if has {
				m.WriteString(d.markCols[i].glyph)
			} else {
				m.WriteString(" ")
			}
		}
		l = append(l, span{m.String(), stylePlain})
	}
	return l
}

// ownerText is the owner column of a cell.
func (d *drawing) ownerText(c *cell) string {
	switch {
	case c.owner >= 0:
		return d.labels[c.owner]
	case c.users > 1:
		return "+"
	}
	return d.g.free
}

// cellStyle colours a cell by its pool: bold where something runs, dim
// where nothing does, yellow where a stopped container holds it.
func (d *drawing) cellStyle(c *cell) style {
	s := style{fg: poolColor(c.pool)}
	switch {
	case !d.m.showOwners:
	case c.held:
		s = style{fg: colorYellow, bold: true}
	case c.owner >= 0 || c.users > 0:
		s.bold = true
	default:
		s.dim = true
	}
	return s
}

// key explains the letters and marks the map uses, and only those.
func (d *drawing) key() []mapLine {
	used := map[string]bool{}
	free, several := false, false
	for _, c := range d.cells {
		used[c.pool] = true
		free = free || (c.owner < 0 && c.users == 0)
		several = several || (c.owner < 0 && c.users > 1)
	}
	var items []mapLine
	if d.m.pools != nil || d.m.showOwners {
		for _, p := range append(pools.Names(), "") {
			if used[p] {
				items = append(items, mapLine{{poolLetter(p), style{fg: poolColor(p)}}, {" " + orNoPool(p), stylePlain}})
			}
		}
	}
	if d.m.showOwners && free {
		items = append(items, mapLine{{d.g.free, style{dim: true}}, {" free", stylePlain}})
	}
	if d.m.showOwners && several {
		items = append(items, line("+ several containers", stylePlain))
	}
	for _, m := range d.markCols {
		items = append(items, line(m.glyph+" "+m.means, stylePlain))
	}
	if len(items) == 0 {
		return nil
	}
	return d.wrap("key: ", items)
}

func orNoPool(p string) string {
	if p == "" {
		return "in no pool"
	}
	return p
}

// wrap lays items out after prefix, two spaces apart, in lines of the
// map's width.
func (d *drawing) wrap(prefix string, items []mapLine) []mapLine {
	indent := strings.Repeat(" ", len(prefix))
	out := []mapLine{line(prefix, stylePlain)}
	for i, it := range items {
		cur := &out[len(out)-1]
		switch {
		case i == 0:
		case cur.width()+2+it.width() > d.look.width:
			out = append(out, line(indent, stylePlain))
			cur = &out[len(out)-1]
		default:
			*cur = append(*cur, span{"  ", stylePlain})
		}
		*cur = append(*cur, it...)
	}
	return out
}

// legend names the owners: those behind the labels, then those only
// behind "+", then those the map cannot draw at all (a state file from
// another node, CPUs gone offline); and the pools' CPUs it cannot draw.
func (d *drawing) legend() []mapLine {
	type entry struct {
		label string
		o     *mapOwner
	}
	var entries, notDrawn []entry
	for _, i := range d.order {
		entries = append(entries, entry{d.labels[i], &d.m.owners[i]})
	}
	for i := range d.m.owners {
		o := &d.m.owners[i]
		switch _, labelled := d.labels[i]; {
		case labelled:
		case o.cpus.Intersection(d.online).IsEmpty():
			notDrawn = append(notDrawn, entry{strings.Repeat("-", d.labelW), o})
		default:
			entries = append(entries, entry{"+", o})
		}
	}
	entries = append(entries, notDrawn...)
	nameW, whatW := 0, 0
	for _, e := range entries {
		nameW, whatW = max(nameW, len(e.o.name)), max(whatW, len(e.o.what()))
	}
	var out []mapLine
	for _, e := range entries {
		text := fmt.Sprintf("  %-*s  %-*s  %s", nameW, e.o.name, whatW, e.o.what(), e.o.cpus)
		if gone := e.o.cpus.Difference(d.online); !gone.IsEmpty() {
			text += "  (CPUs " + gone.String() + " not online here)"
		}
		st := style{fg: poolColor(e.o.pool), bold: true}
		if e.o.held {
			st = style{fg: colorYellow, bold: true}
		}
		out = append(out, mapLine{{fmt.Sprintf("%-*s", d.labelW, e.label), st}, {text, stylePlain}})
	}
	named := cpuset.New()
	for _, cpus := range d.m.pools {
		named = named.Union(cpus)
	}
	if gone := named.Difference(d.online); !gone.IsEmpty() {
		out = append(out, line("pools name CPUs not online here: "+gone.String(), stylePlain))
	}
	return out
}
