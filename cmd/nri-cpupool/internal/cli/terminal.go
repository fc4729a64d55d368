package cli

// What a terminal gets: colour when stdout is one (and NO_COLOR is not
// set, or --color says otherwise), box-drawing characters when the locale
// is UTF-8. The decisions are pure functions of the flag and the
// environment; only lookTerminal asks the process.

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/cpupool/nri-cpupool/pools"
)

// colorMode is the --color flag.
type colorMode string

const (
	colorAuto   colorMode = "auto"
	colorAlways colorMode = "always"
	colorNever  colorMode = "never"
)

const colorUsage = "`WHEN` to colour the map: auto (on a terminal, unless NO_COLOR is set), always or never"

func (m *colorMode) String() string { return string(*m) }

func (m *colorMode) Set(s string) error {
	switch colorMode(s) {
	case colorAuto, colorAlways, colorNever:
		*m = colorMode(s)
		return nil
	}
	return fmt.Errorf("want auto, always or never, not %q", s)
}

// wantColor decides colour: the flag, else NO_COLOR (https://no-color.org:
// set and not empty), a dumb terminal or output that is no terminal say no.
func wantColor(mode colorMode, getenv func(string) string, terminal bool) bool {
	switch mode {
	case colorAlways:
		return true
	case colorNever:
		return false
	}
	return terminal && getenv("NO_COLOR") == "" && getenv("TERM") != "dumb"
}

// utf8Locale tells whether the locale's character set is UTF-8: the first
// of LC_ALL, LC_CTYPE and LANG that is set decides, as in libc. No locale
// at all is the C locale: ASCII.
func utf8Locale(getenv func(string) string) bool {
	for _, k := range []string{"LC_ALL", "LC_CTYPE", "LANG"} {
		if v := getenv(k); v != "" {
			v = strings.ToLower(v)
			return strings.Contains(v, "utf-8") || strings.Contains(v, "utf8")
		}
	}
	return false
}

// isTerminal tells whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// lookTerminal is how to draw the map for this process writing to w.
func lookTerminal(mode colorMode, w io.Writer) mapLook {
	return mapLook{width: mapWidth, color: wantColor(mode, os.Getenv, isTerminal(w)), utf8: utf8Locale(os.Getenv)}
}

// printMap draws the map on w.
func printMap(w io.Writer, m nodeMap, look mapLook) {
	for _, l := range drawNodeMap(m, look) {
		fmt.Fprintln(w, l)
	}
}

// mapWidth is the width the map fits: the classic terminal, whatever the
// terminal is, so that the map looks the same in a ticket as on screen.
const mapWidth = 80

// style is how a span of text looks in colour; the zero style is plain.
type style struct {
	fg        int // ANSI foreground colour, 0 for the default
	bold, dim bool
}

const (
	colorRed     = 31
	colorGreen   = 32
	colorYellow  = 33
	colorMagenta = 35
	colorCyan    = 36
)

var (
	stylePlain  = style{}
	styleTitle  = style{bold: true}
	styleBorder = style{dim: true}
)

// poolColor is a pool's colour in the map.
func poolColor(pool string) int {
	switch pool {
	case pools.Exclusive:
		return colorRed
	case pools.Shared:
		return colorGreen
	case pools.Infra:
		return colorCyan
	case pools.ExclusiveNonIsolcpus:
		return colorMagenta
	}
	return 0
}

// sgr is the escape sequence that starts the style; "" for plain.
func (s style) sgr() string {
	var codes []string
	if s.bold {
		codes = append(codes, "1")
	}
	if s.dim {
		codes = append(codes, "2")
	}
	if s.fg != 0 {
		codes = append(codes, strconv.Itoa(s.fg))
	}
	if codes == nil {
		return ""
	}
	return "\x1b[" + strings.Join(codes, ";") + "m"
}

// span is text in one style.
type span struct {
	text  string
	style style
}

// mapLine is a line of styled spans; its width is that of its text.
type mapLine []span

func line(text string, s style) mapLine { return mapLine{{text, s}} }

func (l mapLine) width() int {
	w := 0
	for _, s := range l {
		w += utf8.RuneCountInString(s.text)
	}
	return w
}

// render writes the line, with ANSI colours or without.
func (l mapLine) render(color bool) string {
	var b strings.Builder
	for _, s := range l {
		if on := s.style.sgr(); color && on != "" && s.text != "" {
			b.WriteString(on + s.text + "\x1b[0m")
		} else {
			b.WriteString(s.text)
		}
	}
	return strings.TrimRight(b.String(), " ")
}
