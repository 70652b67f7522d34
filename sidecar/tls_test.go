package sidecar

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/svc-dev/svc/internal/testkit"
)

// tlsCheck dials the gRPC listener with the client TLS configuration and
// sends one Check; it returns the error of the call.
func tlsCheck(t testing.TB, addr net.Addr, cfg *tls.Config, token string) error {
	t.Helper()
	var creds grpc.DialOption
	if cfg == nil {
		creds = grpc.WithTransportCredentials(insecure.NewCredentials())
	} else {
		creds = grpc.WithTransportCredentials(credentials.NewTLS(cfg))
	}
	conn, err := grpc.NewClient(addr.String(), creds)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = authv3.NewAuthorizationClient(conn).Check(ctx, checkRequest(token, "GET", "/orders/1"))
	return err
}

// TestTLSAndMutualTLS runs the sidecar with a server certificate and a
// client CA: grpc-go and net/http clients with a certificate the CA
// issued are served; no certificate, a certificate of another CA, and
// plaintext are refused. A renewed server certificate is picked up
// without a restart.
func TestTLSAndMutualTLS(t *testing.T) {
	idp := newTestIdP(t)
	dir := t.TempDir()
	ca, otherCA := testkit.NewCA(t, "svc test CA"), testkit.NewCA(t, "another CA")
	srv := ca.Server(t)
	cli, wrong := ca.Client(t), otherCA.Client(t)

	cfg := testConfig(idp)
	cfg.Sidecar.TLSCertFile = filepath.Join(dir, "tls.crt")
	cfg.Sidecar.TLSKeyFile = filepath.Join(dir, "tls.key")
	cfg.Sidecar.TLSClientCAFile = filepath.Join(dir, "client-ca.pem")
	testkit.WriteFile(t, cfg.Sidecar.TLSCertFile, srv.CertPEM)
	testkit.WriteFile(t, cfg.Sidecar.TLSKeyFile, srv.KeyPEM)
	testkit.WriteFile(t, cfg.Sidecar.TLSClientCAFile, ca.PEM)
	r := startServer(t, Deps{Engine: newTestEngine(t, cfg)})

	roots := ca.Pool()
	good := &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cli.KeyPair(t)}}
	token := idp.token(t, "alice", testTenant, "viewer")

	tests := []struct {
		name    string
		cfg     *tls.Config
		wantErr bool
	}{
		{"client certificate of the CA", good, false},
		{"no client certificate", &tls.Config{RootCAs: roots}, true},
		{"client certificate of another CA", &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{wrong.KeyPair(t)}}, true},
		{"plaintext", nil, true},
	}
	for _, tc := range tests {
		t.Run("grpc "+tc.name, func(t *testing.T) {
			err := tlsCheck(t, r.GRPCAddr(), tc.cfg, token)
			if (err != nil) != tc.wantErr {
				t.Errorf("Check: %v, want error %v", err, tc.wantErr)
			}
		})
		if tc.cfg == nil {
			continue
		}
		t.Run("https "+tc.name, func(t *testing.T) {
			c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tc.cfg}}
			resp, err := c.Get("https://" + r.HTTPAddr().String() + PathHealthz)
			if err == nil {
				resp.Body.Close()
			}
			if (err != nil) != tc.wantErr {
				t.Errorf("GET %s: %v, want error %v", PathHealthz, err, tc.wantErr)
			}
		})
	}

	// Renew the server certificate: new handshakes present it.
	renewed := ca.Server(t)
	testkit.WriteFile(t, cfg.Sidecar.TLSKeyFile, renewed.KeyPEM)
	testkit.WriteFile(t, cfg.Sidecar.TLSCertFile, renewed.CertPEM)
	testkit.Eventually(t, "the renewed certificate is served", func() bool {
		c, err := tls.Dial("tcp", r.HTTPAddr().String(), good)
		if err != nil {
			return false
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Equal(renewed.Cert)
	})
	if err := tlsCheck(t, r.GRPCAddr(), good, token); err != nil {
		t.Errorf("Check after the renewal: %v", err)
	}

	// Rotate the client CA: certificates of the new CA are accepted, those
	// of the old one refused, without a restart.
	testkit.WriteFile(t, cfg.Sidecar.TLSClientCAFile, otherCA.PEM)
	rotated := &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{wrong.KeyPair(t)}}
	testkit.Eventually(t, "a client certificate of the new CA is accepted", func() bool {
		return tlsCheck(t, r.GRPCAddr(), rotated, token) == nil
	})
	if err := tlsCheck(t, r.GRPCAddr(), good, token); err == nil {
		t.Error("a client certificate of the retired CA is still accepted")
	}
}

// TestUnixSockets serves gRPC and HTTP on Unix domain sockets with the
// configured file mode.
func TestUnixSockets(t *testing.T) {
	dir := t.TempDir()
	grpcSock, httpSock := filepath.Join(dir, "grpc.sock"), filepath.Join(dir, "http.sock")
	cfg := devConfig()
	cfg.SDK.SidecarAddr, cfg.Sidecar.HTTPAddr = "unix://"+grpcSock, "unix://"+httpSock
	cfg.Sidecar.SocketMode = "0600"
	r := startServer(t, Deps{Engine: newTestEngine(t, cfg)})

	for _, p := range []string{grpcSock, httpSock} {
		st, err := os.Stat(p)
		if err != nil || st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want a socket with mode 0600", p, st.Mode(), err)
		}
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", httpSock)
		},
	}}
	testkit.Eventually(t, "ready over the socket", func() bool {
		resp, err := c.Get("http://localhost" + PathReadyz)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	resp, body := testkit.Get(t, c, "http://localhost"+PathStatus)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"status"`) {
		t.Errorf("GET %s over the socket = %d %s", PathStatus, resp.StatusCode, body)
	}
	conn := testkit.DialGRPC(t, "unix://"+grpcSock)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := authv3.NewAuthorizationClient(conn).Check(ctx, checkRequest("dev", "GET", "/orders/1")); err != nil {
		t.Errorf("Check over the socket: %v", err)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	// A socket file left behind by a process that is gone does not keep
	// the next sidecar out.
	stale, err := net.Listen("unix", httpSock)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	if _, err := os.Stat(httpSock); err != nil {
		t.Fatalf("no stale socket file: %v", err)
	}
	startServer(t, Deps{Engine: newTestEngine(t, cfg)})
}
