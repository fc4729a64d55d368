//go:build !race

package hostfiles

// raceBuild: see racebuild_on_test.go.
const raceBuild = false
