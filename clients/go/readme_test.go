// The READMEs show only code the tests run: every Go block of this
// folder's README (and the repository README's Go lines) appears in a test
// file, and the SQL recipe is the statement the PostgreSQL test runs.

package leases_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	leases "github.com/dagnats/dagnats-leases/clients/go"
	"github.com/nats-io/nats.go"
)

var codeBlock = regexp.MustCompile("(?s)```(go|sql)\n(.*?)```")

// normalized drops blank lines and the spacing gofmt decides.
func normalized(code string) []string {
	var lines []string
	for _, line := range strings.Split(code, "\n") {
		if words := strings.Fields(line); len(words) > 0 {
			lines = append(lines, strings.Join(words, " "))
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

// checkBlocks finds each Go and SQL block of readme in what the tests run.
// The tests connect to their own server: nats.DefaultURL in a README is
// natsURL in a test.
func checkBlocks(t *testing.T, readme string) {
	data, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	sources := testSources(t)
	for _, block := range codeBlock.FindAllStringSubmatch(string(data), -1) {
		lang, code := block[1], strings.TrimSpace(block[2])
		code = strings.ReplaceAll(code, "nats.Connect(nats.DefaultURL)", "nats.Connect(natsURL)")
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

func TestTheReadmesShowOnlyCodeTheTestsRun(t *testing.T) {
	checkBlocks(t, "README.md")
	checkBlocks(t, filepath.Join("..", "..", "README.md"))
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "go get "+modulePath(t)+"\n") {
		t.Error("the README's go get names another module")
	}
}

// The repository README's Go lines, as written there.
func TestTheRepositoryReadmesGoExampleRuns(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	nc, _ := nats.Connect(natsURL)
	keeper := leases.StartKeeper(leases.NewClient(nc), leases.KeeperOptions{Key: "notify-leader", Holder: "notify-7f3a", TTL: 15 * time.Second, Wait: true})
	defer keeper.Stop(ctx)
	fence, err := keeper.WaitOwner(ctx)         // before each write: keeper.Fence(); false means stop
	fmt.Println("leading at fence", fence, err) // send the fence with every write
	defer nc.Close()
	if now, ok := keeper.Fence(); err != nil || !ok || now < fence {
		t.Fatalf("WaitOwner gave %d, %v; Fence says %d, %v", fence, err, now, ok)
	}
}
