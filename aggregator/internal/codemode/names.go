package codemode

import "go.starlark.net/syntax"

// Identifiers are the names a program's text uses, for the aggregator to
// send the runner only the tools among them (not the caller's whole
// catalog, which may hold thousands): a tool is a function of the
// program only where the program names it, and call("name", ...) reaches
// any tool whatever was sent. A program that does not parse uses none;
// the runner reports its syntax error.
func Identifiers(program string) map[string]bool {
	f, err := fileOptions.Parse("program", program, 0)
	if err != nil {
		return nil
	}
	names := map[string]bool{}
	syntax.Walk(f, func(n syntax.Node) bool {
		if id, ok := n.(*syntax.Ident); ok {
			names[id.Name] = true
		}
		return true
	})
	return names
}
