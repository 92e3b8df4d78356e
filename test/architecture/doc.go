// Package architecture holds the test that keeps ARCHITECTURE.md's import
// table true of the code.
package architecture
