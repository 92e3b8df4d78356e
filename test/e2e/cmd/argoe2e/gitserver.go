package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// The ports Argo CD's fixture's repository URLs and ssh_known_hosts name.
const (
	gitSSHPort        = 2222
	gitHTTPSPort      = 9443
	gitClientCertPort = 9444
)

// startGitServer serves the fixture's repositories (ARGOCD_E2E_DIR/*.git) as
// its own git server does, from Debian's packages: nginx over HTTPS with the
// fixture's server certificate and .htpasswd, in front of git-http-backend
// through fcgiwrap (9443; 9444 also asks for a client certificate of the
// fixture's CA), and sshd with the fixture's host keys, its client key
// authorized for root (the user of the fixture's ssh:// URLs). The
// configuration is written here from those facts; nothing outside the work
// dir is touched but sshd's privilege separation directory, which it needs.
func (s *stack) startGitServer() error {
	dir := filepath.Join(s.work, "git")
	fixture := filepath.Join(s.src, "test", "fixture")
	for _, d := range []string{dir, filepath.Join(dir, "nginx", "tmp"), filepath.Join(dir, "ssh")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	fcgiwrap, _ := harness.Tool("fcgiwrap")
	nginx, _ := harness.Tool("nginx")
	sshd, _ := harness.Tool("sshd")
	backend, err := gitHTTPBackend()
	if err != nil {
		return err
	}

	sock := filepath.Join(dir, "fcgiwrap.sock")
	p, err := harness.Start("fcgiwrap", []string{fcgiwrap, "-s", "unix:" + sock}, nil, dir, s.logf)
	if err != nil {
		return err
	}
	s.git = append(s.git, p)
	if err := harness.Eventually(10*time.Second, 50*time.Millisecond, func() (bool, error) {
		if done, err := p.Exited(); done {
			return false, harness.Final(fmt.Errorf("fcgiwrap exited: %w\n%s", err, p.Output()))
		}
		_, err := os.Stat(sock)
		return err == nil, err
	}); err != nil {
		return err
	}

	listen := func(port int, opts string) string {
		out := fmt.Sprintf("    listen 127.0.0.1:%d %s;\n", port, opts)
		if ipv6() {
			out += fmt.Sprintf("    listen [::1]:%d %s;\n", port, opts)
		}
		return out
	}
	location := fmt.Sprintf(`    location ~ /argo-e2e(/.*) {
      client_max_body_size 0;
      include /etc/nginx/fastcgi_params;
      fastcgi_param SCRIPT_FILENAME %s;
      fastcgi_param GIT_HTTP_EXPORT_ALL "";
      fastcgi_param GIT_PROJECT_ROOT %s;
      fastcgi_param PATH_INFO $1;
      fastcgi_param REMOTE_USER $remote_user;
      fastcgi_pass unix:%s;
    }
`, backend, s.e2eDir, sock)
	tls := fmt.Sprintf(`    auth_basic "Restricted";
    auth_basic_user_file %s;
    ssl_certificate %s;
    ssl_certificate_key %s;
`, filepath.Join(fixture, "testrepos", ".htpasswd"), filepath.Join(fixture, "certs", "argocd-test-server.crt"),
		filepath.Join(fixture, "certs", "argocd-test-server.key"))
	tmp := filepath.Join(dir, "nginx", "tmp")
	conf := fmt.Sprintf(`# Argo CD's fixture's git server (test/fixture/testrepos), for make e2e-argo.
daemon off;
master_process off;
pid %s;
error_log stderr info;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path %s/body;
  fastcgi_temp_path %s/fastcgi;
  proxy_temp_path %s/proxy;
  uwsgi_temp_path %s/uwsgi;
  scgi_temp_path %s/scgi;
  server {
%s%s%s  }
  server {
%s%s    ssl_client_certificate %s;
    ssl_verify_client on;
%s  }
}
`, filepath.Join(dir, "nginx", "nginx.pid"), tmp, tmp, tmp, tmp, tmp,
		listen(gitHTTPSPort, "ssl"), tls, location,
		listen(gitClientCertPort, "ssl"), tls, filepath.Join(fixture, "certs", "argocd-test-ca.crt"), location)
	nginxConf := filepath.Join(dir, "nginx", "nginx.conf")
	if err := os.WriteFile(nginxConf, []byte(conf), 0o644); err != nil {
		return err
	}
	// master_process off: one process, as the user running the tests, which
	// reads the work dir and the fcgiwrap socket without sharing them.
	p, err = harness.Start("nginx", []string{nginx, "-p", filepath.Join(dir, "nginx"), "-c", nginxConf, "-e", "stderr"}, nil, dir, s.logf)
	if err != nil {
		return err
	}
	s.git = append(s.git, p)
	if err := waitTCP(p, "nginx", gitHTTPSPort); err != nil {
		return err
	}

	// sshd refuses host keys others may read: the fixture's, copied 0600.
	var hostKeys []string
	keys, _ := filepath.Glob(filepath.Join(fixture, "testrepos", "ssh_host_*_key"))
	for _, k := range keys {
		b, err := os.ReadFile(k)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, "ssh", filepath.Base(k))
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			return err
		}
		hostKeys = append(hostKeys, "HostKey "+dst)
	}
	pub, err := os.ReadFile(filepath.Join(fixture, "testrepos", "id_rsa.pub"))
	if err != nil {
		return err
	}
	authorized := filepath.Join(dir, "ssh", "authorized_keys")
	if err := os.WriteFile(authorized, pub, 0o600); err != nil {
		return err
	}
	listenSSH := "ListenAddress 127.0.0.1:" + strconv.Itoa(gitSSHPort)
	if ipv6() {
		listenSSH += "\nListenAddress [::1]:" + strconv.Itoa(gitSSHPort)
	}
	// The fixture's Procfile starts sshd with this key exchange only, to keep
	// Argo CD's fix for argo-cd#6253 tested.
	sshdConf := fmt.Sprintf(`%s
%s
PidFile %s
AuthorizedKeysFile %s
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
KexAlgorithms diffie-hellman-group-exchange-sha256
SetEnv PATH=%s
`, listenSSH, strings.Join(hostKeys, "\n"), filepath.Join(dir, "ssh", "sshd.pid"), authorized, os.Getenv("PATH"))
	conffile := filepath.Join(dir, "ssh", "sshd_config")
	if err := os.WriteFile(conffile, []byte(sshdConf), 0o600); err != nil {
		return err
	}
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return fmt.Errorf("sshd's privilege separation directory: %w", err)
	}
	p, err = harness.Start("sshd", []string{sshd, "-D", "-e", "-f", conffile}, nil, dir, s.logf)
	if err != nil {
		return err
	}
	s.git = append(s.git, p)
	return waitTCP(p, "sshd", gitSSHPort)
}

// gitHTTPBackend is git's CGI program.
func gitHTTPBackend() (string, error) {
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return "", fmt.Errorf("git --exec-path: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "git-http-backend"), nil
}

func waitTCP(p *harness.Process, name string, port int) error {
	return harness.Eventually(15*time.Second, 50*time.Millisecond, func() (bool, error) {
		if done, err := p.Exited(); done {
			return false, harness.Final(fmt.Errorf("%s exited: %w\n%s", name, err, lastLines(p.Output(), 30)))
		}
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
		if err != nil {
			return false, err
		}
		c.Close()
		return true, nil
	})
}

// ipv6 reports whether ::1 can be bound: localhost may resolve to it first.
func ipv6() bool {
	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		return false
	}
	l.Close()
	return true
}
