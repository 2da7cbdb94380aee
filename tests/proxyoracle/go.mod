module kvdtype.test/proxyoracle

go 1.26

require golang.org/x/net v0.57.0

require golang.org/x/text v0.40.0 // indirect
