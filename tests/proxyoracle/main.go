// Command proxyoracle answers, for each case on stdin, which proxy Go's own rules
// (golang.org/x/net/http/httpproxy, what net/http.ProxyFromEnvironment and so kubectl use) give a
// request URL under an environment: the tests' oracle for kubectl_kvdtype/_sources/proxy.py.
//
// Input: one JSON object a line, {"env": {"NAME": "value", ...}, "url": "https://host:port/"}.
// Output: one JSON object a line, {"proxy": null} or {"proxy": {"scheme", "hostname", "port",
// "username", "password", "user", "hasPassword"}}, or {"error": "..."}.
package main

import (
	"bufio"
	"encoding/json"
	"net/url"
	"os"

	"golang.org/x/net/http/httpproxy"
)

type request struct {
	Env map[string]string `json:"env"`
	URL string            `json:"url"`
}

type proxy struct {
	Scheme      string `json:"scheme"`
	Hostname    string `json:"hostname"`
	Port        string `json:"port"`
	User        bool   `json:"user"`
	Username    string `json:"username"`
	Password    string `json:"password"`
	HasPassword bool   `json:"hasPassword"`
}

type answer struct {
	Proxy *proxy `json:"proxy"`
	Error string `json:"error,omitempty"`
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var r request
		if err := json.Unmarshal(in.Bytes(), &r); err != nil {
			out.Encode(answer{Error: "input: " + err.Error()})
			continue
		}
		out.Encode(decide(r))
	}
}

// decide reads the environment as FromEnvironment reads the process's own: it is set for the case.
func decide(r request) answer {
	os.Clearenv()
	for name, value := range r.Env {
		os.Setenv(name, value)
	}
	target, err := url.Parse(r.URL)
	if err != nil {
		return answer{Error: "url: " + err.Error()}
	}
	chosen, err := httpproxy.FromEnvironment().ProxyFunc()(target)
	if err != nil {
		return answer{Error: err.Error()}
	}
	if chosen == nil {
		return answer{}
	}
	p := &proxy{Scheme: chosen.Scheme, Hostname: chosen.Hostname(), Port: chosen.Port()}
	if chosen.User != nil {
		p.User = true
		p.Username = chosen.User.Username()
		p.Password, p.HasPassword = chosen.User.Password()
	}
	return answer{Proxy: p}
}
