package testenv

// MigratedDatabase and RedisKeySpace are MySQL and Redis without their skip under -short,
// so that the fast tier still checks how they fail when the service is down.
var (
	MigratedDatabase = migratedDatabase
	RedisKeySpace    = redisKeySpace
)
