module github.com/switchboard-mcp/switchboard/test

go 1.26.0
