package override_test

import (
	"errors"
	"fmt"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/override"
	"github.com/switchboard-mcp/switchboard/services/config"
)

// Example shows the three places an override acts: the name the naming
// rule gets, the definition the catalog lists, the arguments a call sends.
func Example() {
	set, err := override.Compile([]config.ToolOverride{{
		Backend: "tickets", Tool: "search", Name: "find", Description: "Find tickets.",
		Arguments: map[string]config.ArgumentOverride{
			"tenant": {Hidden: true, Value: "acme"},
			"limit":  {Default: 20},
		},
	}}, nil)
	if err != nil {
		panic(err)
	}
	tool := set.Tool("tickets", "search")

	fmt.Println(tool.Name("search"))

	def, _ := tool.Definition([]byte(`{"name":"search","inputSchema":{"type":"object","properties":{"q":{"type":"string"},"tenant":{"type":"string"},"limit":{"type":"integer"}},"required":["q","tenant"]}}`))
	fmt.Println(string(def))

	args, _ := tool.Arguments([]byte(`{"q":"printer"}`))
	fmt.Println(string(args))

	_, err = tool.Arguments([]byte(`{"q":"printer","tenant":"other"}`))
	fmt.Println(errors.Is(err, override.ErrHiddenArgument), err)
	// Output:
	// find
	// {"name":"find","inputSchema":{"type":"object","properties":{"q":{"type":"string"},"limit":{"type":"integer","default":20}},"required":["q"]},"description":"Find tickets."}
	// {"q":"printer","tenant":"acme","limit":20}
	// true argument "tenant" is fixed by the server's configuration; a call may not set it
}
