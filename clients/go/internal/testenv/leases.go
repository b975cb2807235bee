// A nats-server with JetStream and a gateway on it.

package testenv

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
)

// Env is a running nats-server and dagnats-leases gateway.
type Env struct {
	NATSURL string
	NATS    *Process
	Gateway *Process
	dir     string
}

// Start runs nats-server (NATS_SERVER_BIN, default
// .tools/nats/bin/nats-server) and the gateway (DAGNATS_LEASES_BIN, default
// target/debug/dagnats-leases) on free loopback ports, and waits until the
// gateway's /readyz answers 200 (the bucket is ready). Stopped by
// t.Cleanup.
func Start(t TB) *Env {
	t.Helper()
	env, err := StartEnv(FreePort(t), FreePort(t))
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(env.Stop)
	return env
}

// StartEnv is Start for TestMain, which has no t: the caller stops it.
func StartEnv(natsPort, httpPort int) (*Env, error) {
	// Checked before anything starts, so a missing gateway fails at once.
	if _, err := binary("DAGNATS_LEASES_BIN", "target/debug/dagnats-leases"); err != nil {
		return nil, err
	}
	env, err := startNATS(natsPort)
	if err != nil {
		return nil, err
	}
	if err := env.StartGateway(httpPort); err != nil {
		env.Stop()
		return nil, err
	}
	return env, nil
}

// StartNATS runs nats-server alone: no gateway answers the lease subjects
// until StartGateway. Stopped by t.Cleanup.
func StartNATS(t TB) *Env {
	t.Helper()
	env, err := startNATS(FreePort(t))
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(env.Stop)
	return env
}

func startNATS(natsPort int) (*Env, error) {
	natsBin, err := binary("NATS_SERVER_BIN", ".tools/nats/bin/nats-server")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "dagnats-leases-go-")
	if err != nil {
		return nil, err
	}
	env := &Env{NATSURL: "nats://127.0.0.1:" + portString(natsPort), dir: dir}
	env.NATS, err = start("nats-server", dir, natsBin,
		[]string{"-a", "127.0.0.1", "-p", portString(natsPort), "-js", "-sd", filepath.Join(dir, "jetstream")}, nil)
	if err != nil {
		env.Stop()
		return nil, err
	}
	err = waitUntil(env.NATS, 10*time.Second, "accepting connections", func() bool {
		nc, err := nats.Connect(env.NATSURL)
		if err == nil {
			nc.Close()
		}
		return err == nil
	})
	if err != nil {
		env.Stop()
		return nil, err
	}
	return env, nil
}

// StartGateway starts (another) gateway on this env's nats-server and waits
// until it is ready.
func (env *Env) StartGateway(httpPort int) error {
	gatewayBin, err := binary("DAGNATS_LEASES_BIN", "target/debug/dagnats-leases")
	if err != nil {
		return err
	}
	addr := net.JoinHostPort("127.0.0.1", portString(httpPort))
	env.Gateway, err = start("gateway", env.dir, gatewayBin,
		[]string{"serve", "--nats-url", env.NATSURL, "--http-addr", addr}, nil)
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: time.Second}
	return waitUntil(env.Gateway, 20*time.Second, "ready (/readyz 200)", func() bool {
		resp, err := client.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// Connect opens a NATS connection to the env, closed by t.Cleanup.
func (env *Env) Connect(t TB) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(env.NATSURL)
	if err != nil {
		t.Fatalf("cannot connect to %s: %v", env.NATSURL, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Stop ends the gateway, then nats-server, and removes their directory.
func (env *Env) Stop() {
	if env.Gateway != nil {
		env.Gateway.Stop()
	}
	if env.NATS != nil {
		env.NATS.Stop()
	}
	if env.dir != "" {
		_ = os.RemoveAll(env.dir)
	}
}
