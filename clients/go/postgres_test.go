// Fencing a real store: the README's PostgreSQL recipe against a real
// PostgreSQL, with a holder paused past its TTL (docs/protocol.md, Holder
// rules and client libraries).

package leases_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	leases "github.com/dagnats/dagnats-leases/clients/go"
	"github.com/dagnats/dagnats-leases/clients/go/internal/testenv"
	"github.com/nats-io/nats.go"
)

// fencedWrite is the recipe: one conditional statement, so that the
// check and the write cannot be split by another writer. The row keeps
// the highest fence that wrote it and refuses any lower one.
const fencedWrite = `UPDATE jobs SET data = $1, fence = $2 WHERE id = $3 AND fence <= $2`

const createJobs = `CREATE TABLE jobs (id integer PRIMARY KEY, data text NOT NULL, fence bigint NOT NULL DEFAULT 0)`

// writeJob writes as owner, at the fence it sends along.
func writeJob(ctx context.Context, db *sql.DB, keeper *leases.Keeper, id int, data string) (bool, error) {
	fence, ok := keeper.Fence()
	if !ok {
		return false, nil // not the owner now
	}
	res, err := db.ExecContext(ctx, `UPDATE jobs SET data = $1, fence = $2 WHERE id = $3 AND fence <= $2`, data, fence, id)
	if err != nil {
		return false, err
	}
	rows, err := res.RowsAffected()
	return rows == 1, err // 0 rows: a newer owner has written
}

// fencedHolderEnv, when set, makes the test binary the holder process:
// TestMain runs runFencedHolder instead of the tests.
const fencedHolderEnv = "LEASES_TEST_FENCED_HOLDER"

// runFencedHolder keeps a lease, prints "owner <fence>", then answers each
// "write <data>" line with "rows <n> owner <true|false>": the rows its
// fenced write changed, always at the fence it had when it became owner,
// and whether its keeper says it owns the key now.
func runFencedHolder() int {
	nc, err := nats.Connect(os.Getenv("NATS_URL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer nc.Close()
	db, err := sql.Open("postgres", os.Getenv("PG_DSN"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer db.Close()
	ctx := context.Background()
	keeper := leases.StartKeeper(leases.NewClient(nc), leases.KeeperOptions{
		Key: os.Getenv("LEASE_KEY"), Holder: "holder-a", TTL: 2 * time.Second, Wait: true})
	defer keeper.Stop(ctx)
	fence, err := keeper.WaitOwner(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("owner", fence)
	commands := bufio.NewScanner(os.Stdin)
	for commands.Scan() {
		data := strings.TrimPrefix(commands.Text(), "write ")
		res, err := db.ExecContext(ctx, fencedWrite, data, fence, 1)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		rows, _ := res.RowsAffected()
		_, owner := keeper.Fence()
		fmt.Println("rows", rows, "owner", owner)
	}
	return 0
}

// holderProcess is holder A: the test binary run as runFencedHolder.
type holderProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startHolder(t *testing.T, key, dsn string) *holderProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), fencedHolderEnv+"=1", "NATS_URL="+shared.NATSURL, "PG_DSN="+dsn, "LEASE_KEY="+key)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &holderProcess{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	go func() {
		out := bufio.NewScanner(stdout)
		for out.Scan() {
			h.lines <- out.Text()
		}
		close(h.lines)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	return h
}

// say reads holder A's next line.
func (h *holderProcess) say(t *testing.T, within time.Duration) []string {
	t.Helper()
	select {
	case line, ok := <-h.lines:
		if !ok {
			t.Fatal("holder A exited")
		}
		return strings.Fields(line)
	case <-time.After(within):
		t.Fatalf("holder A said nothing within %v", within)
		return nil
	}
}

func (h *holderProcess) write(t *testing.T, data string) (rows int, owner bool) {
	t.Helper()
	if _, err := fmt.Fprintln(h.stdin, "write", data); err != nil {
		t.Fatal(err)
	}
	said := h.say(t, 5*time.Second)
	if len(said) != 4 || said[0] != "rows" {
		t.Fatalf("holder A said %q", said)
	}
	rows, _ = strconv.Atoi(said[1])
	return rows, said[3] == "true"
}

func row(t *testing.T, db *sql.DB) (data string, fence uint64) {
	t.Helper()
	if err := db.QueryRow(`SELECT data, fence FROM jobs WHERE id = 1`).Scan(&data, &fence); err != nil {
		t.Fatal(err)
	}
	return data, fence
}

// Holder A writes, is paused past its TTL, B takes over and writes; when A
// resumes, its write at the fence it had is refused by the database itself
// (0 rows), and the row holds B's data.
func TestPostgresRefusesTheWriteOfAHolderPausedPastItsTTL(t *testing.T) {
	pg := testenv.StartPostgres(t)
	db, err := sql.Open("postgres", pg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, statement := range []string{createJobs, `INSERT INTO jobs (id, data) VALUES (1, 'initial')`} {
		if _, err := db.Exec(statement); err != nil {
			t.Fatal(err)
		}
	}
	key := uniqueKey(t)

	a := startHolder(t, key, pg.DSN)
	said := a.say(t, 10*time.Second)
	fenceA, err := strconv.ParseUint(said[len(said)-1], 10, 64)
	if len(said) != 2 || said[0] != "owner" || err != nil {
		t.Fatalf("holder A said %q", said)
	}
	if rows, _ := a.write(t, "from-a"); rows != 1 {
		t.Fatalf("holder A's first write changed %d rows", rows)
	}
	if data, fence := row(t, db); data != "from-a" || fence != fenceA {
		t.Fatalf("row after A's write: %q at fence %d", data, fence)
	}

	b := leases.StartKeeper(newClient(t), leases.KeeperOptions{Key: key, Holder: "holder-b", TTL: 2 * time.Second, Wait: true})
	defer b.Stop(context.Background())
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	fenceB, err := b.WaitOwner(ctxFor(t, 2*time.Second+2*time.Second))
	if err != nil {
		t.Fatalf("B did not take over from the paused A: %v", err)
	}
	t.Logf("B took over %v after A was paused", time.Since(paused))
	if fenceB <= fenceA {
		t.Fatalf("B's fence %d is not above A's %d", fenceB, fenceA)
	}
	if wrote, err := writeJob(ctxFor(t, 5*time.Second), db, b, 1, "from-b"); err != nil || !wrote {
		t.Fatalf("B's write through the recipe: wrote %v, %v", wrote, err)
	}
	_, fenceWritten := row(t, db)
	if fenceWritten < fenceB {
		t.Fatalf("B wrote at fence %d, below its %d", fenceWritten, fenceB)
	}

	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	rows, ownerA := a.write(t, "from-a-late")
	if rows != 0 {
		t.Fatalf("the database let paused holder A write at fence %d over B's %d", fenceA, fenceB)
	}
	if data, fence := row(t, db); data != "from-b" || fence != fenceWritten {
		t.Fatalf("row after A's late write: %q at fence %d, want B's at %d", data, fence, fenceWritten)
	}
	if ownerA {
		t.Fatal("holder A's keeper says it owns the key after the pause")
	}
}
