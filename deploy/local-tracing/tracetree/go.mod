module github.com/switchboard-mcp/switchboard/deploy/local-tracing/tracetree

go 1.26.0
