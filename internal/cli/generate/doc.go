// Package generate implements `xpu-cdi generate` and `xpu-cdi refresh`.
package generate
