package stdio

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// serveRaw is a stdio server written by hand, one JSON-RPC line at a
// time, for what go-sdk's server would never send (mode is serverEnv's):
//
//   - raw-odd lists, beside the tool ok, a resource whose URI does not
//     parse (with the query key=$UPSTREAM_API_KEY when that is set), a URI template that is not one and a tool whose parameter
//     header annotation is not valid;
//   - raw-warming fails its first tools/list, as a server still starting,
//     and implements no resources/templates/list;
//   - raw-churn has 102 tools, and a call of poke tells the client its
//     tool list changed;
//   - raw-wedged stops reading its stdin at the first call of hang;
//   - raw-mute answers initialize and nothing after it;
//   - raw-flood tells the client its tool list changed 5000 times at a
//     call of flood, and a call of lists answers how many tools/list it
//     was asked;
//   - raw-leaky fails every tools/list with an error that quotes its
//     UPSTREAM_API_KEY;
//   - raw-then-mute serves subscriptions when the file STARTED_FILE
//     names does not exist, and creates it; started again, it is
//     raw-mute;
//   - raw-then-slow is raw-then-mute but, started again, leaves only its
//     first resources/subscribe unanswered, and a call of subs answers
//     how many it answered;
//   - raw-chatty prints lines that are no messages as it starts (text, a
//     JSON log line, a Python dict, a list), and two before each tool's
//     answer, as a server that prints to its stdout;
//   - raw-orphan, at a call of crash, starts a child that holds its
//     stdout and exits;
//   - raw-endless answers every tools/list with a page of one tool whose
//     description is RAW_DESCRIPTION_BYTES long, and a next cursor;
//   - raw-nullid answers every notification it is sent (its
//     notifications/initialized among them) with a JSON-RPC error whose
//     id is null, as JSON-RPC 2.0 has a server answer a request whose id
//     it could not read;
//   - raw-snoop, at a call of snoop, answers its capability sets and
//     no_new_privs (of /proc/self/status) and the STDIO_TEST_ variables
//     it reads in its parent's environment, or why it cannot read it.
//
// Every other call of a tool answers "pid=<its pid>".
func serveRaw(mode string) {
	restarted := false
	if mode == "raw-then-mute" || mode == "raw-then-slow" {
		if _, err := os.Stat(os.Getenv("STARTED_FILE")); err == nil {
			restarted = true
		} else if err := os.WriteFile(os.Getenv("STARTED_FILE"), nil, 0o600); err != nil {
			panic(err)
		}
		if restarted && mode == "raw-then-mute" {
			mode = "raw-mute"
		}
	}
	if mode == "raw-chatty" {
		fmt.Println("Starting the raw server on stdio, key " + os.Getenv("UPSTREAM_API_KEY"))
		// What looks like JSON but is no message: a structured log line,
		// a Python dict printed, a list.
		fmt.Println(`{"level":"info","msg":"structured log line"}`)
		fmt.Println(`{'python': 'dict printed'}`)
		fmt.Println(`[1, 2, 3]`)
	}
	lists, subscribes := 0, 0
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	for in.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &req) != nil || req.ID == nil {
			if mode == "raw-nullid" {
				fmt.Println(`{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"Method not found"}}`)
			}
			continue
		}
		if mode == "raw-mute" && req.Method != "initialize" {
			continue
		}
		var result string
		switch req.Method {
		case "initialize":
			result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true}},"serverInfo":{"name":"raw","version":"0"}}`
		case "ping":
			result = `{}`
		case "tools/list":
			lists++
			if mode == "raw-leaky" {
				fmt.Printf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"upstream refused key %s"}}`+"\n", req.ID, os.Getenv("UPSTREAM_API_KEY"))
				continue
			}
			if mode == "raw-endless" {
				size, _ := strconv.Atoi(os.Getenv("RAW_DESCRIPTION_BYTES"))
				fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"t%d","description":"%s","inputSchema":{"type":"object"}}],"nextCursor":"%d"}}`+"\n",
					req.ID, lists, strings.Repeat("d", size), lists)
				continue
			}
			if mode == "raw-warming" && lists == 1 {
				fmt.Printf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"warming up"}}`+"\n", req.ID)
				continue
			}
			var b strings.Builder
			b.WriteString(`{"tools":[{"name":"ok","inputSchema":{"type":"object"}},{"name":"hang","inputSchema":{"type":"object"}}`)
			switch mode {
			case "raw-odd":
				b.WriteString(`,{"name":"odd","inputSchema":{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"not a header"}}}}`)
			case "raw-flood":
				b.WriteString(`,{"name":"flood","inputSchema":{"type":"object"}},{"name":"lists","inputSchema":{"type":"object"}}`)
			case "raw-then-slow":
				b.WriteString(`,{"name":"subs","inputSchema":{"type":"object"}}`)
			case "raw-snoop":
				b.WriteString(`,{"name":"snoop","inputSchema":{"type":"object"}}`)
			case "raw-orphan":
				b.WriteString(`,{"name":"crash","inputSchema":{"type":"object"}}`)
			case "raw-churn":
				b.WriteString(`,{"name":"poke","inputSchema":{"type":"object"}}`)
				for i := range 100 {
					fmt.Fprintf(&b, `,{"name":"t%04d","inputSchema":{"type":"object"}}`, i)
				}
			}
			b.WriteString(`]}`)
			result = b.String()
		case "resources/subscribe":
			if subscribes++; restarted && subscribes == 1 {
				continue
			}
			result = `{}`
		case "resources/list":
			result = `{"resources":[]}`
			if mode == "raw-odd" {
				offer := "file:///data/50%off.txt"
				if key := os.Getenv("UPSTREAM_API_KEY"); key != "" {
					offer += "?key=" + key
				}
				result = `{"resources":[{"uri":"` + offer + `","name":"offer"},{"uri":"file:///data/fine.txt","name":"fine"}]}`
			}
		case "resources/templates/list":
			result = `{"resourceTemplates":[]}`
			if mode == "raw-warming" {
				// Resources without templates, as many servers have.
				fmt.Printf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no such method"}}`+"\n", req.ID)
				continue
			}
			if mode == "raw-odd" {
				result = `{"resourceTemplates":[{"uriTemplate":"file:///{unclosed","name":"bad"}]}`
			}
		case "tools/call":
			result = fmt.Sprintf(`{"content":[{"type":"text","text":"pid=%d"}]}`, os.Getpid())
			switch {
			case mode == "raw-wedged" && req.Params.Name == "hang":
				select {} // reads nothing more
			case mode == "raw-churn" && req.Params.Name == "poke":
				fmt.Println(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
			case mode == "raw-flood" && req.Params.Name == "flood":
				for range 5000 {
					fmt.Println(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
				}
			case mode == "raw-flood" && req.Params.Name == "lists":
				result = fmt.Sprintf(`{"content":[{"type":"text","text":"%d"}]}`, lists)
			case mode == "raw-orphan" && req.Params.Name == "crash":
				child := exec.Command("sleep", "60")
				child.Stdout = os.Stdout
				if err := child.Start(); err != nil {
					panic(err)
				}
				os.Exit(3)
			case mode == "raw-snoop" && req.Params.Name == "snoop":
				text, _ := json.Marshal(snoop())
				result = fmt.Sprintf(`{"content":[{"type":"text","text":%s}]}`, text)
			case mode == "raw-chatty":
				fmt.Println("[INFO] calling " + req.Params.Name)
				fmt.Println(`{"level":"debug","tool":"` + req.Params.Name + `"}`)
			case req.Params.Name == "subs":
				result = fmt.Sprintf(`{"content":[{"type":"text","text":"%d"}]}`, subscribes-1)
			}
		default:
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no such method"}}`+"\n", req.ID)
			continue
		}
		fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", req.ID, result)
	}
}

// snoop is what raw-snoop answers: the lines of /proc/self/status naming
// its capabilities and no_new_privs, then its parent's environment, or
// the error reading it.
func snoop() string {
	var out strings.Builder
	status, _ := os.ReadFile("/proc/self/status")
	for line := range strings.Lines(string(status)) {
		if strings.HasPrefix(line, "Cap") || strings.HasPrefix(line, "NoNewPrivs") {
			out.WriteString(line)
		}
	}
	environ, err := os.ReadFile("/proc/" + strconv.Itoa(os.Getppid()) + "/environ")
	if err != nil {
		fmt.Fprintf(&out, "parent's environment: %v\n", err)
		return out.String()
	}
	// The test's own variables only: the rest is the machine's.
	out.WriteString("parent's environment:")
	for v := range bytes.SplitSeq(environ, []byte{0}) {
		if bytes.HasPrefix(v, []byte("STDIO_TEST_")) {
			fmt.Fprintf(&out, " %s", v)
		}
	}
	return out.String() + "\n"
}
