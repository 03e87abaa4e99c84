module github.com/switchboard-mcp/switchboard/indexer

go 1.26.0
