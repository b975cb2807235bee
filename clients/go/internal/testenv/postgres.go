// A PostgreSQL server from Debian's binaries, in a temporary directory.

package testenv

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	// The driver database/sql opens "postgres" with: Debian's lib/pq.
	_ "github.com/lib/pq"
)

// Postgres is a running PostgreSQL server with trust authentication.
type Postgres struct {
	// DSN reaches the server's postgres database as user postgres.
	DSN string
}

// StartPostgres runs initdb into a temporary directory and postgres on a
// free loopback port, its socket in that directory, and stops it with
// t.Cleanup. The binaries come from POSTGRES_BIN_DIR (default Debian's
// /usr/lib/postgresql/15/bin). PostgreSQL refuses to run as root, so as
// root both run as the user nobody, owning the directory.
func StartPostgres(t TB) *Postgres {
	t.Helper()
	binDir := os.Getenv("POSTGRES_BIN_DIR")
	if binDir == "" {
		binDir = "/usr/lib/postgresql/15/bin"
	}
	for _, program := range []string{"initdb", "postgres"} {
		if !fileExists(filepath.Join(binDir, program)) {
			t.Fatalf("POSTGRES_BIN_DIR: no %s in %s (Debian: postgresql-15)", program, binDir)
		}
	}
	dir, err := os.MkdirTemp("", "dagnats-leases-pg-")
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	cred, err := unprivileged(dir)
	if err != nil {
		t.Fatalf("%v", err)
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(binDir, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb failed: %v\n%s", err, out)
	}
	port := FreePort(t)
	server, err := start("postgres", dir, filepath.Join(binDir, "postgres"), []string{
		"-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
	}, cred)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(server.Stop)
	pg := &Postgres{DSN: fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=postgres sslmode=disable", port)}
	err = waitUntil(server, 30*time.Second, "accepting connections", func() bool {
		db, err := sql.Open("postgres", pg.DSN)
		if err != nil {
			return false
		}
		defer db.Close()
		return db.Ping() == nil
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
	return pg
}

// unprivileged is the credential PostgreSQL runs with: nil when not root;
// as root, the user nobody, given dir.
func unprivileged(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("running as root, and no user nobody to run PostgreSQL as: %v", err)
	}
	uid, _ := strconv.ParseUint(nobody.Uid, 10, 32)
	gid, _ := strconv.ParseUint(nobody.Gid, 10, 32)
	if err := os.Chown(dir, int(uid), int(gid)); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}
