package main

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// mdUnit is a table row, list item, heading or paragraph outside fenced
// code: the scope of a config key's short forms, and of links.
type mdUnit struct {
	line int    // the first line's number
	text string // its lines joined with \n
}

// mdSpan is one code span.
type mdSpan struct {
	line int
	text string
}

// Link is a relative link target found in a Markdown file.
type Link struct {
	Line   int
	Target string
}

// mdFile is what docscheck reads of a Markdown file.
type mdFile struct {
	units []mdUnit
	// spans are the code spans of each unit.
	spans [][]mdSpan
	// code is the text of every code span and fenced block.
	code strings.Builder
	// anchors are the heading slugs and HTML anchors.
	anchors map[string]bool
	links   []Link
}

var (
	fenceRE      = regexp.MustCompile("^\\s*(`{3,}|~{3,})")
	atxRE        = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	setextRE     = regexp.MustCompile(`^ {0,3}(=+|-+)[ \t]*$`)
	itemRE       = regexp.MustCompile(`^\s*([-*+]|\d+[.)])(\s|$)`)
	refDefRE     = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*(\S+)`)
	htmlAnchorRE = regexp.MustCompile(`<a\s[^>]*\b(?:name|id)="([^"]+)"`)
	schemeRE     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
)

// parseMarkdown reads the units, code, anchors and links of a Markdown
// text.
func parseMarkdown(text string) *mdFile {
	md := &mdFile{anchors: map[string]bool{}}
	slugs := slugger{}
	var cur []string
	curLine := 0
	flush := func() {
		if len(cur) > 0 {
			md.addUnit(mdUnit{curLine, strings.Join(cur, "\n")})
		}
		cur = nil
	}
	heading := func(line int, text string) {
		md.addUnit(mdUnit{line, text})
		md.anchors[slugs.slug(headingText(text))] = true
	}
	lines := strings.Split(text, "\n")
	fence := ""
	for i, line := range lines {
		n := i + 1
		if fence != "" {
			t := strings.TrimSpace(line)
			if strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" {
				fence = ""
				continue
			}
			md.code.WriteString(line)
			md.code.WriteByte('\n')
			continue
		}
		if m := fenceRE.FindStringSubmatch(line); m != nil {
			flush()
			fence = m[1]
			continue
		}
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		if m := atxRE.FindStringSubmatch(line); m != nil {
			flush()
			heading(n, m[2])
			continue
		}
		if setextRE.MatchString(line) && len(cur) > 0 && !strings.HasPrefix(strings.TrimSpace(cur[0]), "|") &&
			!itemRE.MatchString(cur[0]) && !strings.HasPrefix(strings.TrimSpace(cur[0]), ">") {
			t := strings.Join(cur, " ")
			cur = nil
			heading(curLine, t)
			continue
		}
		if len(cur) == 0 || strings.HasPrefix(strings.TrimSpace(line), "|") || itemRE.MatchString(line) || refDefRE.MatchString(line) {
			flush()
			curLine = n
		}
		cur = append(cur, line)
	}
	flush()
	return md
}

// addUnit records a unit with its code spans, anchors and links.
func (md *mdFile) addUnit(u mdUnit) {
	spans, rest := codeSpans(u.text)
	for i := range spans {
		spans[i].line += u.line
		md.code.WriteString(spans[i].text)
		md.code.WriteByte('\n')
	}
	md.units = append(md.units, u)
	md.spans = append(md.spans, spans)
	for _, m := range htmlAnchorRE.FindAllStringSubmatch(rest, -1) {
		md.anchors[m[1]] = true
	}
	for _, l := range linkTargets(rest) {
		md.links = append(md.links, Link{u.line + strings.Count(rest[:l.off], "\n"), l.target})
	}
}

// codeSpans finds the code spans of s (CommonMark's rule: a run of n
// backticks up to the next run of exactly n) and returns s with them
// blanked out, newlines kept. A span's line is relative to s's first.
func codeSpans(s string) ([]mdSpan, string) {
	var spans []mdSpan
	rest := []byte(s)
	runAt := func(i int) int {
		j := i
		for j < len(s) && s[j] == '`' {
			j++
		}
		return j - i
	}
	for i := 0; i < len(s); {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == '`':
			i += 2
			continue
		case s[i] != '`':
			i++
			continue
		}
		n := runAt(i)
		end := -1
		for j := i + n; j < len(s); {
			if s[j] != '`' {
				j++
				continue
			}
			m := runAt(j)
			if m == n {
				end = j
				break
			}
			j += m
		}
		if end < 0 {
			i += n
			continue
		}
		content := strings.ReplaceAll(s[i+n:end], "\n", " ")
		if len(content) >= 2 && content[0] == ' ' && content[len(content)-1] == ' ' && strings.Trim(content, " ") != "" {
			content = content[1 : len(content)-1]
		}
		spans = append(spans, mdSpan{strings.Count(s[:i], "\n"), content})
		for k := i; k < end+n; k++ {
			if rest[k] != '\n' {
				rest[k] = ' '
			}
		}
		i = end + n
	}
	return spans, string(rest)
}

// linkTargets finds the targets of the inline links ([text](target)) and
// link reference definitions of s, code spans already blanked out, in
// order. Targets with a URL scheme are left out.
func linkTargets(s string) []linkAt {
	var out []linkAt
	add := func(off int, t string) {
		if t != "" && !schemeRE.MatchString(t) && !strings.HasPrefix(t, "//") {
			out = append(out, linkAt{off, t})
		}
	}
	for i := 0; ; {
		k := strings.Index(s[i:], "](")
		if k < 0 {
			break
		}
		start := i + k + 2
		j := start
		for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
			j++
		}
		var target string
		if j < len(s) && s[j] == '<' {
			if e := strings.IndexByte(s[j:], '>'); e > 0 {
				target = s[j+1 : j+e]
				j += e + 1
			}
		} else {
			depth, e := 0, j
			for ; e < len(s); e++ {
				c := s[e]
				if c == '(' {
					depth++
				} else if c == ')' {
					if depth == 0 {
						break
					}
					depth--
				} else if c == ' ' || c == '\t' || c == '\n' {
					break
				}
			}
			target = s[j:e]
			j = e
		}
		add(start, target)
		i = max(j, start)
	}
	offset := 0
	for line := range strings.SplitSeq(s, "\n") {
		if m := refDefRE.FindStringSubmatchIndex(line); m != nil {
			add(offset+m[2], strings.Trim(line[m[2]:m[3]], "<>"))
		}
		offset += len(line) + 1
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].off < out[j].off })
	return out
}

// linkAt is a link target and its offset.
type linkAt struct {
	off    int
	target string
}

var (
	inlineLinkRE = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTagRE    = regexp.MustCompile(`<[^>]+>`)
)

// headingText is a heading's text as GitHub renders it: code spans'
// contents, links' texts, no HTML tags.
func headingText(s string) string {
	spans, _ := codeSpans(s)
	for _, sp := range spans {
		s = strings.Replace(s, "`"+sp.text+"`", sp.text, 1)
	}
	s = inlineLinkRE.ReplaceAllString(s, "$1")
	s = htmlTagRE.ReplaceAllString(s, "")
	return strings.TrimSpace(s)
}

// Slug is GitHub's anchor for a heading text: lower case, letters,
// digits, - and _ kept, each space a -, everything else dropped.
func Slug(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.M, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// slugger gives repeated headings' slugs -1, -2, ... as GitHub does.
type slugger map[string]int

func (s slugger) slug(text string) string {
	base := Slug(text)
	slug := base
	for {
		if _, used := s[slug]; !used {
			break
		}
		s[base]++
		slug = base + "-" + strconv.Itoa(s[base])
	}
	s[slug] = 0
	return slug
}
