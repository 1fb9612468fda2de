package kube

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is where the API server is and how to authenticate to it: a bearer token (given, or
// read from a file that may be rotated), a client certificate, or a user name and password;
// the server's certificate is checked against a CA (given, or the system's).
type Config struct {
	Host string // https://host:port (or http://)

	CAData     []byte
	CAFile     string
	Insecure   bool   // do not check the server's certificate
	ServerName string // the name the server's certificate must carry, when not Host's

	CertData, KeyData []byte // the client certificate and key, PEM
	CertFile, KeyFile string // read at each TLS handshake, so a renewed pair is taken up

	BearerToken string
	TokenFile   string // re-read every minute (service account tokens are rotated)
	Username    string
	Password    string

	ProxyURL  string // "" = the proxy of the environment (HTTPS_PROXY, NO_PROXY)
	UserAgent string
}

// serviceAccountDir holds the service account's token and the cluster's CA in every Pod that
// mounts them.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// ErrNotInCluster says that bay does not run in a Pod.
var ErrNotInCluster = errors.New("not in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set")

// InCluster is the configuration of a process in a Pod: the API server at the kubernetes
// Service's address, the service account's token and CA.
func InCluster() (*Config, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, ErrNotInCluster
	}
	token := filepath.Join(serviceAccountDir, "token")
	if _, err := os.Stat(token); err != nil {
		return nil, fmt.Errorf("in-cluster service account token: %w", err)
	}
	ca := filepath.Join(serviceAccountDir, "ca.crt")
	if _, err := os.Stat(ca); err != nil {
		return nil, fmt.Errorf("in-cluster CA: %w", err)
	}
	return &Config{Host: "https://" + net.JoinHostPort(host, port), TokenFile: token, CAFile: ca}, nil
}

// kubeconfig is the part of a kubeconfig file bay reads.
type kubeconfig struct {
	CurrentContext string `yaml:"current-context"`
	Clusters       []struct {
		Name    string `yaml:"name"`
		Cluster struct {
			Server                   string `yaml:"server"`
			CertificateAuthority     string `yaml:"certificate-authority"`
			CertificateAuthorityData string `yaml:"certificate-authority-data"`
			InsecureSkipTLSVerify    bool   `yaml:"insecure-skip-tls-verify"`
			TLSServerName            string `yaml:"tls-server-name"`
			ProxyURL                 string `yaml:"proxy-url"`
		} `yaml:"cluster"`
	} `yaml:"clusters"`
	Users []struct {
		Name string `yaml:"name"`
		User struct {
			ClientCertificate     string    `yaml:"client-certificate"`
			ClientCertificateData string    `yaml:"client-certificate-data"`
			ClientKey             string    `yaml:"client-key"`
			ClientKeyData         string    `yaml:"client-key-data"`
			Token                 string    `yaml:"token"`
			TokenFile             string    `yaml:"tokenFile"`
			Username              string    `yaml:"username"`
			Password              string    `yaml:"password"`
			Exec                  yaml.Node `yaml:"exec"`
			AuthProvider          yaml.Node `yaml:"auth-provider"`
		} `yaml:"user"`
	} `yaml:"users"`
	Contexts []struct {
		Name    string `yaml:"name"`
		Context struct {
			Cluster string `yaml:"cluster"`
			User    string `yaml:"user"`
		} `yaml:"context"`
	} `yaml:"contexts"`
}

// LoadKubeconfig reads the current context of the kubeconfig files (the first file that sets
// the current context, or defines a cluster, user or context, wins, as kubectl merges
// $KUBECONFIG). Relative paths in a file are relative to its directory. Credential plugins
// (exec, auth-provider) are not run: such a user is refused.
func LoadKubeconfig(paths ...string) (*Config, error) {
	var current string
	files := make([]*kubeconfig, 0, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig: %w", err)
		}
		var kc kubeconfig
		if err := yaml.Unmarshal(b, &kc); err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", p, err)
		}
		files = append(files, &kc)
		if current == "" {
			current = kc.CurrentContext
		}
	}
	if current == "" {
		return nil, fmt.Errorf("kubeconfig %s: no current-context", strings.Join(paths, ", "))
	}
	var ctxCluster, ctxUser string
	found := false
	for _, kc := range files {
		for _, c := range kc.Contexts {
			if c.Name == current && !found {
				ctxCluster, ctxUser, found = c.Context.Cluster, c.Context.User, true
			}
		}
	}
	if !found {
		return nil, fmt.Errorf("kubeconfig: context %q not found", current)
	}
	cfg := &Config{}
	clusterFound, userFound := false, ctxUser == ""
	for i, kc := range files {
		dir := filepath.Dir(paths[i])
		abs := func(p string) string {
			if p == "" || filepath.IsAbs(p) {
				return p
			}
			return filepath.Join(dir, p)
		}
		for _, c := range kc.Clusters {
			if c.Name != ctxCluster || clusterFound {
				continue
			}
			clusterFound = true
			cl := c.Cluster
			cfg.Host, cfg.CAFile, cfg.Insecure, cfg.ServerName, cfg.ProxyURL = cl.Server, abs(cl.CertificateAuthority), cl.InsecureSkipTLSVerify, cl.TLSServerName, cl.ProxyURL
			if cl.CertificateAuthorityData != "" {
				b, err := base64.StdEncoding.DecodeString(cl.CertificateAuthorityData)
				if err != nil {
					return nil, fmt.Errorf("kubeconfig cluster %s: certificate-authority-data: %w", c.Name, err)
				}
				cfg.CAData, cfg.CAFile = b, ""
			}
		}
		for _, u := range kc.Users {
			if u.Name != ctxUser || userFound {
				continue
			}
			userFound = true
			us := u.User
			if !us.Exec.IsZero() || !us.AuthProvider.IsZero() {
				return nil, fmt.Errorf("kubeconfig user %s: credential plugins (exec, auth-provider) are not supported by bay: give a token, a token file or a client certificate", u.Name)
			}
			cfg.CertFile, cfg.KeyFile = abs(us.ClientCertificate), abs(us.ClientKey)
			cfg.BearerToken, cfg.TokenFile = us.Token, abs(us.TokenFile)
			cfg.Username, cfg.Password = us.Username, us.Password
			for _, d := range []struct {
				name string
				in   string
				out  *[]byte
				file *string
			}{{"client-certificate-data", us.ClientCertificateData, &cfg.CertData, &cfg.CertFile}, {"client-key-data", us.ClientKeyData, &cfg.KeyData, &cfg.KeyFile}} {
				if d.in == "" {
					continue
				}
				b, err := base64.StdEncoding.DecodeString(d.in)
				if err != nil {
					return nil, fmt.Errorf("kubeconfig user %s: %s: %w", u.Name, d.name, err)
				}
				*d.out, *d.file = b, ""
			}
		}
	}
	if !clusterFound {
		return nil, fmt.Errorf("kubeconfig: cluster %q of context %q not found", ctxCluster, current)
	}
	if !userFound {
		return nil, fmt.Errorf("kubeconfig: user %q of context %q not found", ctxUser, current)
	}
	if cfg.Host == "" {
		return nil, fmt.Errorf("kubeconfig: cluster %q has no server", ctxCluster)
	}
	return cfg, nil
}

// DefaultKubeconfigPaths are the files kubectl reads: $KUBECONFIG (a list), else
// ~/.kube/config.
func DefaultKubeconfigPaths() []string {
	if v := os.Getenv("KUBECONFIG"); v != "" {
		var out []string
		for _, p := range filepath.SplitList(v) {
			if p != "" {
				out = append(out, p)
			}
		}
		return out
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return nil
	}
	return []string{filepath.Join(home, ".kube", "config")}
}

// tlsConfig is the TLS client configuration of cfg.
func (cfg *Config) tlsConfig() (*tls.Config, error) {
	tc := &tls.Config{InsecureSkipVerify: cfg.Insecure, ServerName: cfg.ServerName, MinVersion: tls.VersionTLS12} //nolint:gosec // insecure only when the kubeconfig says so
	ca := cfg.CAData
	if cfg.CAFile != "" {
		b, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CA: %w", err)
		}
		ca = b
	}
	if len(ca) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, errors.New("CA: no PEM certificate in it")
		}
		tc.RootCAs = pool
	}
	if len(cfg.CertData) == 0 && cfg.CertFile == "" {
		return tc, nil
	}
	load := func() (*tls.Certificate, error) {
		certPEM, keyPEM := cfg.CertData, cfg.KeyData
		var err error
		if cfg.CertFile != "" {
			if certPEM, err = os.ReadFile(cfg.CertFile); err != nil {
				return nil, fmt.Errorf("client certificate: %w", err)
			}
		}
		if cfg.KeyFile != "" {
			if keyPEM, err = os.ReadFile(cfg.KeyFile); err != nil {
				return nil, fmt.Errorf("client key: %w", err)
			}
		}
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		return &c, nil
	}
	first, err := load() // a broken pair fails now, not at the first request
	if err != nil {
		return nil, err
	}
	if cfg.CertFile == "" && cfg.KeyFile == "" {
		tc.Certificates = []tls.Certificate{*first}
		return tc, nil
	}
	tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return load() }
	return tc, nil
}

// Transport is an HTTP transport to the API server that adds cfg's credentials. http1 keeps
// it to HTTP/1.1 (a connection upgrade, such as a WebSocket through the Pod proxy, cannot
// pass over HTTP/2).
func (cfg *Config) Transport(http1 bool) (http.RoundTripper, error) {
	tc, err := cfg.tlsConfig()
	if err != nil {
		return nil, err
	}
	proxy := http.ProxyFromEnvironment
	if cfg.ProxyURL != "" {
		u, err := url.Parse(cfg.ProxyURL)
		if err != nil {
			return nil, fmt.Errorf("proxy-url %q: %w", cfg.ProxyURL, err)
		}
		proxy = http.ProxyURL(u)
	}
	if http1 {
		tc.NextProtos = []string{"http/1.1"}
	}
	tr := &http.Transport{
		Proxy:               proxy,
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tc,
		TLSHandshakeTimeout: 10 * time.Second,
		IdleConnTimeout:     90 * time.Second,
		MaxIdleConnsPerHost: 25,
		ForceAttemptHTTP2:   !http1,
		// A connection that went silent (a restarted API server, a changed route) would hold
		// every watch on it forever: HTTP/2 pings it after 30 s without a frame and drops it
		// when no answer comes within 15 s, as client-go does.
		HTTP2: &http.HTTP2Config{SendPingTimeout: 30 * time.Second, PingTimeout: 15 * time.Second},
	}
	a := &authTransport{next: tr, cfg: cfg}
	if cfg.BearerToken == "" && cfg.TokenFile != "" {
		if _, err := a.token(); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// authTransport adds the user agent and the credentials to each request.
type authTransport struct {
	next http.RoundTripper
	cfg  *Config

	mu     sync.Mutex
	tok    string
	readAt time.Time
}

// tokenTTL is how long a token read from a file is used before the file is read again.
const tokenTTL = time.Minute

func (a *authTransport) token() (string, error) {
	if a.cfg.BearerToken != "" || a.cfg.TokenFile == "" {
		return a.cfg.BearerToken, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.tok != "" && time.Since(a.readAt) < tokenTTL {
		return a.tok, nil
	}
	b, err := os.ReadFile(a.cfg.TokenFile)
	if err != nil {
		if a.tok != "" {
			return a.tok, nil // keep the last token while the file is being replaced
		}
		return "", fmt.Errorf("token file: %w", err)
	}
	a.tok, a.readAt = strings.TrimSpace(string(b)), time.Now()
	return a.tok, nil
}

// RoundTrip implements http.RoundTripper.
func (a *authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if a.cfg.UserAgent != "" && r.Header.Get("User-Agent") == "" {
		r.Header.Set("User-Agent", a.cfg.UserAgent)
	}
	if r.Header.Get("Authorization") == "" {
		tok, err := a.token()
		if err != nil {
			if r.Body != nil {
				r.Body.Close()
			}
			return nil, err
		}
		switch {
		case tok != "":
			r.Header.Set("Authorization", "Bearer "+tok)
		case a.cfg.Username != "":
			r.SetBasicAuth(a.cfg.Username, a.cfg.Password)
		}
	}
	return a.next.RoundTrip(r)
}

// CloseIdleConnections closes the transport's idle connections.
func (a *authTransport) CloseIdleConnections() {
	if c, ok := a.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
