// The READMEs show only code the tests run: every Go block of this
// folder's README (and the repository README's Go lines) appears in a test
// file, and the SQL recipe is the statement the PostgreSQL test runs.

package leases_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var codeBlock = regexp.MustCompile("(?s)```(go|sql)\n(.*?)```")

// normalized drops indentation and blank lines.
func normalized(code string) []string {
	var lines []string
	for _, line := range strings.Split(code, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			lines = append(lines, line)
		}
	}
	return lines
}

func testSources(t *testing.T) string {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, normalized(string(data))...)
	}
	return "\n" + strings.Join(all, "\n") + "\n"
}

func modulePath(t *testing.T) string {
	data, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(normalized(string(data))[0], "module ")
}

func checkBlocks(t *testing.T, readme string) {
	data, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	sources := testSources(t)
	for _, block := range codeBlock.FindAllStringSubmatch(string(data), -1) {
		lang, code := block[1], strings.TrimSpace(block[2])
		switch {
		case lang == "sql":
			if code != createJobs && code != fencedWrite {
				t.Errorf("%s: the SQL block %q is not the statement the PostgreSQL test runs", readme, code)
			}
		case strings.HasPrefix(code, "import leases "):
			if code != `import leases "`+modulePath(t)+`"` {
				t.Errorf("%s: %q does not import this module", readme, code)
			}
		case !strings.Contains(sources, "\n"+strings.Join(normalized(code), "\n")+"\n"):
			t.Errorf("%s: no test runs this Go block:\n%s", readme, code)
		}
	}
}

func TestTheReadmeShowsOnlyCodeTheTestsRun(t *testing.T) {
	checkBlocks(t, "README.md")
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "go get "+modulePath(t)+"\n") {
		t.Error("the README's go get names another module")
	}
}
