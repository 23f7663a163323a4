module github.com/svrp/svrp

go 1.24.0

require github.com/mr-tron/base58 v1.3.0
