//go:build !race

package plugin

// raceBuild: see racebuild_on_test.go.
const raceBuild = false
