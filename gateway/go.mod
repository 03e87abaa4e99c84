module github.com/switchboard-mcp/switchboard/gateway

go 1.26.0
