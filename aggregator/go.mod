module github.com/switchboard-mcp/switchboard/aggregator

go 1.26.0
