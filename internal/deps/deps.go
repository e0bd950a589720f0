// Package deps pins direct dependencies while the packages that use them are written.
package deps

import (
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/google/uuid"
	_ "github.com/labstack/echo/v4"
	_ "github.com/pressly/goose/v3"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/redis/go-redis/v9"
	_ "github.com/smartwalle/alipay/v3"
	_ "go.temporal.io/sdk/client"
	_ "go.temporal.io/sdk/testsuite"
)
