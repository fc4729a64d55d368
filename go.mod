module github.com/cpupool/nri-cpupool

go 1.26.0

require (
	github.com/stretchr/testify v1.12.1
	gopkg.in/yaml.v3 v3.0.1
	k8s.io/utils v0.0.0-20261023123148-ca04ba58ecab
)

require (
	github.com/kr/pretty v0.3.1 // indirect
	github.com/rogpeppe/go-internal v1.14.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	gopkg.in/check.v1 v1.0.0-20201130134442-10cb98267c6c // indirect
)
