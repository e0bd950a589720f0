module github.com/paykit/paykit/tools/wechatpay-gopay-check

go 1.26

require github.com/go-pay/gopay v1.5.123

require (
	github.com/go-pay/crypto v0.0.3 // indirect
	github.com/go-pay/errgroup v0.0.3 // indirect
	github.com/go-pay/smap v0.0.2 // indirect
	github.com/go-pay/util v0.0.4 // indirect
	github.com/go-pay/xlog v0.0.3 // indirect
	github.com/go-pay/xtime v0.0.2 // indirect
)
