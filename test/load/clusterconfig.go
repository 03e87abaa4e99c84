package load

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"text/template"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// configTemplate is the deployment's one configuration file. Service
// tokens and the session key stay ${VAR} references, filled from the
// children's environment. The API keys are written into the file: there
// may be hundreds, the file is private to the run (mode 0600, in the
// run's own directory) and the keys are random per cluster.
var configTemplate = template.Must(template.New("config").Funcs(template.FuncMap{"principal": PrincipalName, "join": strings.Join}).Parse(`serviceAuth:
  credentials:
    - name: gateway
      token: ${SWITCHBOARD_GATEWAY_TOKEN}
      assertPrincipals: true
      allow: ["switchboard.aggregator.v1.AggregatorService/*", "switchboard.indexer.v1.IndexerService/*"]
    - name: indexer
      token: ${SWITCHBOARD_INDEXER_TOKEN}
      assertPrincipals: true
      allow: [switchboard.aggregator.v1.AggregatorService/Discover, switchboard.aggregator.v1.AggregatorService/ListTools, switchboard.aggregator.v1.AggregatorService/WatchCatalog]
{{- if .Tasks}}
    - name: aggregator
      token: ${SWITCHBOARD_AGGREGATOR_TOKEN}
      assertPrincipals: true
      allow: [{{join .AggregatorAllow ", "}}]
{{- end}}
logging:
  level: warn
  format: text
{{- if .Pprof}}
ops:
  pprof: true
{{- end}}
gateway:
  listen: {{.Gateway}}
{{- if .GatewayOps}}
  opsListen: {{.GatewayOps}}
{{- end}}
  auth:
{{- if .Keys}}
    mode: apiKeys
    apiKeys:
{{- range $i, $k := .Keys}}
      - key: "{{$k}}"
        subject: {{principal $i}}
{{- end}}
{{- else}}
    mode: anonymous
{{- end}}
  sessions:
    key: ${SWITCHBOARD_SESSION_KEY}
  aggregator:
    address: {{.Aggregator}}
    token: ${SWITCHBOARD_GATEWAY_TOKEN}
  indexer:
    address: {{.Indexer}}
    token: ${SWITCHBOARD_GATEWAY_TOKEN}
aggregator:
  listen: {{.Aggregator}}
  httpListen: {{.AggregatorHTTP}}
  conflictResolution:
    strategy: prefix
    prefixFormat: "{backend}_"
  backends:
{{- range .Backends}}
    - name: {{.Name}}
      url: http://{{.Listen}}/mcp
{{- end}}
{{- if .Tasks}}
  indexer:
    address: {{.Indexer}}
    token: ${SWITCHBOARD_AGGREGATOR_TOKEN}
  tasks:
    maxPerPrincipal: {{.MaxTasks}}
    maxTasks: {{.MaxTasks}}
  codeMode:
    maxCalls: 100
servers:
  - name: {{.TasksServer}}
    backends: [{{.TaskBackend}}]
    codeMode: true
    tools:
      include: ["{{.TaskBackend}}_{{.TaskTool}}"]
    toolOverrides:
      - backend: {{.TaskBackend}}
        tool: {{.TaskTool}}
        taskSupport: optional
{{- end}}
indexer:
  listen: {{.Indexer}}
  httpListen: {{.IndexerHTTP}}
  database: "{{.Database}}"
  aggregator:
    address: {{.Aggregator}}
    token: ${SWITCHBOARD_INDEXER_TOKEN}
`))

type backendAddr struct{ Name, Listen string }

// configData fills configTemplate.
type configData struct {
	Gateway, GatewayOps, Aggregator, AggregatorHTTP, Indexer, IndexerHTTP, Database string
	Backends                                                                        []backendAddr
	Keys                                                                            []string
	Pprof                                                                           bool
	// Tasks adds the virtual server of the tasks measurement (tasks.go)
	// and what an aggregator needs to run tasks: the indexer that keeps
	// them, and a credential of its own allowed AggregatorAllow there.
	Tasks                              bool
	TasksServer, TaskBackend, TaskTool string
	AggregatorAllow                    []string
	MaxTasks                           int
}

// PrincipalName is the subject of the i-th API key of a cluster.
func PrincipalName(i int) string { return fmt.Sprintf("load-principal-%03d", i) }

// maxPrincipals bounds the API keys of one cluster: the gateway holds them
// all in memory and the configuration grows with them.
const maxPrincipals = 10000

// newKeys makes n random API keys (hex, so they need no quoting in YAML).
func newKeys(n int) ([]string, error) {
	if n < 0 || n > maxPrincipals {
		return nil, fmt.Errorf("principals must be in [0, %d], got %d", maxPrincipals, n)
	}
	keys := make([]string, n)
	for i := range keys {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		keys[i] = hex.EncodeToString(b)
	}
	return keys, nil
}

// renderConfig writes the configuration of d and checks that it parses
// the way the services will parse it, with env as their environment.
func renderConfig(d configData, env []string) ([]byte, error) {
	var cfg bytes.Buffer
	if err := configTemplate.Execute(&cfg, d); err != nil {
		return nil, err
	}
	parsed, err := config.Parse(cfg.Bytes(), func(k string) (string, bool) { return lookupEnv(env, k) })
	if err != nil {
		return nil, fmt.Errorf("generated configuration: %w", err)
	}
	if len(parsed.Gateway.Auth.APIKeys) != len(d.Keys) || parsed.Ops.Pprof != d.Pprof || parsed.RunsTasks() != d.Tasks {
		return nil, fmt.Errorf("generated configuration: %d API keys, pprof %v and tasks %v, want %d, %v and %v",
			len(parsed.Gateway.Auth.APIKeys), parsed.Ops.Pprof, parsed.RunsTasks(), len(d.Keys), d.Pprof, d.Tasks)
	}
	return cfg.Bytes(), nil
}

// secretEnv makes fresh random service tokens and a session sealing key for
// one cluster; they reach the children through their environment only.
func secretEnv() ([]string, error) {
	var env []string
	for _, name := range []string{"SWITCHBOARD_GATEWAY_TOKEN", "SWITCHBOARD_INDEXER_TOKEN", "SWITCHBOARD_AGGREGATOR_TOKEN", "SWITCHBOARD_SESSION_KEY"} {
		secret := make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, err
		}
		env = append(env, name+"="+base64.StdEncoding.EncodeToString(secret))
	}
	return env, nil
}

func lookupEnv(env []string, key string) (string, bool) {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}
