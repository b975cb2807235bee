// The module as a user gets it: a go.mod that go get can resolve (real
// module paths and versions, no local replacements), and a package that
// builds under its import path from another module.

package leases_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestTheCommittedGoModNamesOnlyRealModulesAtRealVersions(t *testing.T) {
	data, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	mod := string(data)
	if strings.Contains(mod, "replace") || strings.Contains(mod, "/usr/share") {
		t.Fatal("go.mod must not replace modules: a user's go get would not find them")
	}
	for _, want := range []string{
		"module github.com/dagnats/dagnats-leases/clients/go\n",
		"\ngo 1.19\n",
		"\tgithub.com/nats-io/nats.go v1.22.1\n",
	} {
		if !strings.Contains(mod, want) {
			t.Errorf("go.mod lacks %q", want)
		}
	}
	sums, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	required := regexp.MustCompile(`(?m)^\t(\S+) (v\S+)`).FindAllStringSubmatch(mod, -1)
	for _, req := range required {
		for _, suffix := range []string{" ", "/go.mod "} {
			if !strings.Contains(string(sums), req[1]+" "+req[2]+suffix+"h1:") {
				t.Errorf("go.sum has no %s checksum of %s %s", strings.TrimSpace(suffix+"zip"), req[1], req[2])
			}
		}
	}
}

// The module zip holds only this folder, so it carries the repository's
// license itself: pkg.go.dev shows documentation only for a module whose
// license it finds.
func TestTheModuleCarriesTheRepositorysApacheLicense(t *testing.T) {
	own, err := os.ReadFile("LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	repo, err := os.ReadFile(filepath.Join("..", "..", "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	if string(own) != string(repo) || !strings.Contains(string(own), "Apache License") {
		t.Fatal("clients/go/LICENSE is not the repository's Apache-2.0 license")
	}
}

// A module of a user's, importing this one by its path: built with the
// same dependencies the tests use (the workspace's replacements when
// GOWORK names one, the module proxy otherwise).
func TestThePackageBuildsFromAnotherModuleUnderItsImportPath(t *testing.T) {
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	replaces := "replace github.com/dagnats/dagnats-leases/clients/go => " + here + "\n"
	if work := os.Getenv("GOWORK"); work != "" && work != "off" {
		data, err := os.ReadFile(work)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "replace ") {
				replaces += line + "\n"
			}
		}
	}
	user := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/user\n\ngo 1.19\n\nrequire github.com/dagnats/dagnats-leases/clients/go v0.0.0\n\n" + replaces,
		"main.go": `package main

import (
	"fmt"
	"time"

	leases "github.com/dagnats/dagnats-leases/clients/go"
)

func main() {
	gate := leases.NewFenceGate()
	fmt.Println(gate.Admit(1), leases.KindLost, leases.KeeperOptions{TTL: time.Second}.TTL)
}
`,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(user, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) {
		cmd := exec.Command("go", args...)
		cmd.Dir = user
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("build", "-o", filepath.Join(user, "user"), ".")
	out, err := exec.Command(filepath.Join(user, "user")).CombinedOutput()
	if err != nil || string(out) != "<nil> lost 1s\n" {
		t.Fatalf("the user's program printed %q, %v", out, err)
	}
}
