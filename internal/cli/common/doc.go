// Package common holds what several xpu-cdi commands share: the host root
// flags and discovery with user-facing errors.
package common
