// Package tests holds vera's end-to-end tests that run it in this process:
// app.Run on 127.0.0.1:0 (veratest.Start) against fake upstreams, driven
// by the official clients of every dialect, the admin routes, MCP and a
// browser. What needs vera as a process of its own is in tests/process.
package tests
