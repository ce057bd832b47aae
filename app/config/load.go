package config

import (
	"fmt"
	"os"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/env"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/providers/structs"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"
)

// EnvPrefix starts every environment variable the configuration reads.
const EnvPrefix = "DELAYQ_"

// flagConfigKey maps a command-line flag to its configuration key ("" for
// flags that are not configuration).
func flagConfigKey(name string) string {
	switch name {
	case "redis":
		return "redis.addrs"
	case "sql-dsn":
		return "sql.dsn"
	case "listen":
		return "http.listen"
	case "log-level":
		return "log.level"
	case "api":
		return "cli.api"
	}
	return ""
}

// AddFlags declares the configuration flags on fs (the CLI's persistent
// flags). --config names the YAML file.
func AddFlags(fs *pflag.FlagSet) {
	fs.String("config", "", "YAML config file (default: none; see configs/delayq.yaml)")
	fs.StringSlice("redis", nil, "Redis addresses (redis.addrs); sets redis.mode to single unless the config says otherwise")
	fs.String("sql-dsn", "", "MySQL DSN of the ledger (sql.dsn); sets sql.driver to mysql")
	fs.String("listen", "", "HTTP listen address (http.listen)")
	fs.String("log-level", "", "log level (log.level)")
	fs.String("api", "", "URL of a running instance's API for the operator commands (cli.api), e.g. http://127.0.0.1:8080")
}

// Load builds the configuration: defaults, then the YAML file at path (if
// not empty), then DELAYQ_* environment variables, then the flags of fs that
// were set (fs may be nil). Unknown keys and invalid values are refused
// with the key, the value and why.
func Load(path string, fs *pflag.FlagSet) (Config, error) {
	k := koanf.New(".")
	if err := k.Load(structs.Provider(Defaults(), "koanf"), nil); err != nil {
		return Config{}, fmt.Errorf("config: defaults: %w", err)
	}
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return Config{}, &LoadError{Where: "file " + path, Err: err}
		}
		if err := k.Load(file.Provider(path), yaml.Parser()); err != nil {
			return Config{}, &LoadError{Where: "file " + path, Err: err}
		}
	}
	if err := k.Load(env.ProviderWithValue(EnvPrefix, ".", envKey), nil); err != nil {
		return Config{}, fmt.Errorf("config: environment: %w", err)
	}
	if fs != nil {
		flagKey := func(f *pflag.Flag) (string, any) {
			key := flagConfigKey(f.Name)
			if key == "" || !f.Changed {
				return "", nil
			}
			return key, posflag.FlagVal(fs, f)
		}
		if err := k.Load(posflag.ProviderWithFlag(fs, ".", k, flagKey), nil); err != nil {
			return Config{}, fmt.Errorf("config: flags: %w", err)
		}
		// A Redis address or a DSN on the command line means a real
		// backend, unless the file or environment chose the mode.
		if f := fs.Lookup("redis"); f != nil && f.Changed && k.String("redis.mode") == "embedded" {
			_ = k.Set("redis.mode", "single")
		}
		if f := fs.Lookup("sql-dsn"); f != nil && f.Changed && k.String("sql.driver") == "sqlite" {
			_ = k.Set("sql.driver", "mysql")
		}
	}
	var c Config
	err := k.UnmarshalWithConf("", &c, koanf.UnmarshalConf{
		Tag: "koanf",
		DecoderConfig: &mapstructure.DecoderConfig{
			DecodeHook: mapstructure.ComposeDecodeHookFunc(
				strictNumbers,
				mapstructure.StringToTimeDurationHookFunc(),
				mapstructure.StringToSliceHookFunc(","),
			),
			ErrorUnused:      true,
			WeaklyTypedInput: true,
			Result:           &c,
		},
	})
	if err != nil {
		// Unknown keys and values of the wrong type.
		return Config{}, &LoadError{Err: err}
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// isSection reports whether s is a top-level key; environment variables of
// other names (DELAYQ_TEST_*, say) are not configuration and are left alone.
func isSection(s string) bool {
	switch s {
	case "log", "redis", "sql", "queue", "http", "worker", "recovery", "orders", "metrics", "dashboard", "cli", "tracing":
		return true
	}
	return false
}

// envKey maps DELAYQ_REDIS_ADDRS to redis.addrs: the first underscore
// separates the section, the rest belong to the key. Lists are
// comma-separated.
func envKey(name, value string) (string, any) {
	name = strings.ToLower(strings.TrimPrefix(name, EnvPrefix))
	section, key, ok := strings.Cut(name, "_")
	if !ok || !isSection(section) {
		return "", nil
	}
	if value == "" {
		// Unset, as templated environments write it (${VAR:-}): the
		// file's or the default value stays.
		return "", nil
	}
	if section == "redis" && key == "addrs" || section == "sql" && key == "shards" {
		return section + "." + key, strings.Split(value, ",")
	}
	return section + "." + key, value
}

// LoadError is a configuration that cannot be read: its file missing or
// not YAML, a key delayq does not know, a value of the wrong type. Like a
// value out of range (ErrInvalid), it is the operator's to fix: the
// program exits 2.
type LoadError struct {
	Where string // "file <path>", or "" for the merged configuration
	Err   error
}

func (e *LoadError) Error() string {
	if e.Where == "" {
		return "config: " + e.Err.Error()
	}
	return "config: " + e.Where + ": " + e.Err.Error()
}

func (e *LoadError) Unwrap() error { return e.Err }
