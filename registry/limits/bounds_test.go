package limits

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry/budget"
)

// Every field of Limits has one Bound, a count or a duration, with a flag of its own, a
// default above zero and where it is applied; a field added without one fails here.
func TestBoundsDeclareEveryField(t *testing.T) {
	fields := map[string]bool{}
	lt := reflect.TypeFor[Limits]()
	for i := range lt.NumField() {
		fields[lt.Field(i).Name] = true
	}
	flags := map[string]bool{}
	def := DefaultLimits()
	for _, b := range Bounds() {
		if !fields[b.Field] {
			t.Errorf("a bound declares %q, which is no field of Limits or is declared twice", b.Field)
		}
		delete(fields, b.Field)
		if b.Flag == "" || flags[b.Flag] {
			t.Errorf("%s: flag %q is empty or another bound's", b.Field, b.Flag)
		}
		flags[b.Flag] = true
		if b.Usage == "" || b.Enforced == "" {
			t.Errorf("%s: no usage or no place where it is applied", b.Field)
		}
		n, d := b.Int(&def), b.Duration(&def)
		switch {
		case (n == nil) == (d == nil):
			t.Errorf("%s is neither a count nor a duration", b.Field)
		case n != nil && (*n <= 0 || b.Unit != 0):
			t.Errorf("%s: default %d, unit %v; want a count above zero, with no unit", b.Field, *n, b.Unit)
		case d != nil && (*d <= 0 || b.Share):
			t.Errorf("%s: default %v; want a duration above zero, and no share", b.Field, *d)
		}
		if b.Share && (!b.ZeroTakesDefault || b.def != 0) {
			t.Errorf("%s: a share's zero is its default, and it has no other", b.Field)
		}
	}
	for f := range fields {
		t.Errorf("Limits.%s has no bound: no flag, no default", f)
	}
}

// The refusals' names are those the bounds declare and those the protocol fixes, each once:
// a limit that names no refusal of its own would be counted under none.
func TestBoundsNameEveryRefusal(t *testing.T) {
	declared := slices.Clone(fixedRefusals)
	for _, b := range Bounds() {
		declared = append(declared, b.Refuses...)
	}
	names := budget.Names()
	slices.Sort(declared)
	slices.Sort(names)
	if !slices.Equal(declared, names) {
		t.Errorf("the bounds name the refusals %v\nbudget.Names() is %v", declared, names)
	}
}

// docs/protocol.md §8 names every bound's flag, on a line that gives its default.
func TestBoundsInProtocolDoc(t *testing.T) {
	limits := testkit.Section(t, testkit.Doc(t, "protocol.md"), "\n## 8. ", "\n## 9. ")
	def := DefaultLimits()
	for _, b := range Bounds() {
		flag := "`--" + b.Flag + "`"
		i := strings.Index(limits, flag)
		if i < 0 {
			t.Errorf("docs/protocol.md §8 does not name %s", flag)
			continue
		}
		start := strings.LastIndex(limits[:i], "\n") + 1
		line, _, _ := strings.Cut(limits[start:], "\n")
		if want := docValue(b, def); !strings.Contains(line, want) {
			t.Errorf("docs/protocol.md §8 names %s on a line without its default %s: %s", flag, want, line)
		}
	}
}

// docValue is a bound's default as the documents write it: a count with thousands
// separated, a duration in hours or days.
func docValue(b Bound, def Limits) string {
	if n := b.Int(&def); n != nil {
		return thousands(*n)
	}
	d := *b.Duration(&def)
	if b.Unit == 0 && d%(24*time.Hour) == 0 {
		return strconv.Itoa(int(d/(24*time.Hour))) + " days"
	}
	return strconv.Itoa(int(d/time.Hour)) + " hours"
}

// docs/metrics.md names every limit a refusal can carry, each a value of the limit label.
func TestRefusalsInMetricsDoc(t *testing.T) {
	doc := testkit.Doc(t, "metrics.md")
	i := strings.Index(doc, "| `svrpd_rate_limit_refusals_total` |")
	if i < 0 {
		t.Fatal("docs/metrics.md has no row for svrpd_rate_limit_refusals_total")
	}
	row, _, _ := strings.Cut(doc[i:], "\n")
	for _, n := range budget.Names() {
		if !strings.Contains(row, "`"+n+"`") {
			t.Errorf("docs/metrics.md does not name the limit %s", n)
		}
	}
}

// The budget table of docs/protocol.md §8.1 gives every per-address budget that has an
// aggregate per block with its default and the block's, AddressBlockFactor times it.
func TestBoundsInBudgetTable(t *testing.T) {
	doc := testkit.Section(t, testkit.Doc(t, "protocol.md"), "\n### 8.1 ", "\n## 9. ")
	_, table, ok := strings.Cut(doc, "\n| Budget | Counts | Per address | Per block")
	if !ok {
		t.Fatal("docs/protocol.md §8.1 has no budget table")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	rows := map[[2]string]bool{}
	for _, line := range strings.Split(table, "\n") {
		if cells := strings.Split(line, " | "); len(cells) >= 5 {
			rows[[2]string{cells[2], cells[3]}] = true
		}
	}
	def := DefaultLimits()
	for _, b := range Bounds() {
		if len(b.Refuses) != 2 || !strings.HasSuffix(b.Refuses[1], "_per_block") {
			continue
		}
		n := *b.Int(&def)
		want := [2]string{thousands(n), thousands(n * def.AddressBlockFactor)}
		if !rows[want] {
			t.Errorf("docs/protocol.md §8.1's budget table has no row of %s: %s per address, %s per block", b.Flag, want[0], want[1])
		}
	}
}

// thousands writes n with its thousands separated, as the documents do.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// Where a bound says it is applied in a file of the module, that file exists: a file moved
// or renamed without its bounds following fails here.
func TestBoundsNameFilesThatExist(t *testing.T) {
	file := regexp.MustCompile(`[a-z/]+\.go`)
	for _, b := range Bounds() {
		for _, name := range file.FindAllString(b.Enforced, -1) {
			if _, err := os.Stat(filepath.Join("..", "..", name)); err != nil {
				t.Errorf("%s: applied in %s, which is no file of the module", b.Field, name)
			}
		}
	}
}
