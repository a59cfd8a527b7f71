// Package konfig loads iop's YAML configuration files with koanf: the file
// first, then IOP_-prefixed environment overrides, decoded strictly into a
// plain struct (an unknown key is an error that names the key and the
// file). Validation of values belongs to the caller.
package konfig

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
)

// EnvPrefix is the prefix of every environment override.
const EnvPrefix = "IOP_"

// EnvKey maps an environment variable to a config key: the prefix is
// dropped, the rest lowercased, and a double underscore separates levels
// (IOP_METRICS__LISTEN → metrics.listen; IOP_NODE_ID → node_id).
func EnvKey(name string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(name, EnvPrefix)), "__", ".")
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// ExpandEnv replaces ${NAME} in a config file with the environment
// variable NAME (empty when unset), so secrets can stay out of the file.
// A bare $NAME is left alone (regular expressions use $).
func ExpandEnv(b []byte) []byte {
	return envRef.ReplaceAllFunc(b, func(m []byte) []byte {
		return []byte(os.Getenv(string(envRef.FindSubmatch(m)[1])))
	})
}

// Load reads path (if non-empty) and the environment into out, which must
// be a pointer to a struct with `koanf` tags and its defaults already set.
func Load(path string, out any) error {
	k := koanf.New(".")
	src := "environment"
	if path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("config %s: %w", path, err)
		}
		if err := k.Load(rawbytes.Provider(ExpandEnv(raw)), yaml.Parser()); err != nil {
			return fmt.Errorf("config %s: %w", path, err)
		}
		src = path
	}
	envp := env.Provider(".", env.Opt{
		Prefix: EnvPrefix,
		TransformFunc: func(key, v string) (string, any) {
			return EnvKey(key), v
		},
	})
	if err := k.Load(envp, nil); err != nil {
		return fmt.Errorf("config environment: %w", err)
	}
	dc := &mapstructure.DecoderConfig{
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			mapstructure.StringToTimeDurationHookFunc(),
			mapstructure.StringToSliceHookFunc(","),
		),
		WeaklyTypedInput: true,
		ErrorUnused:      true,
		TagName:          "koanf",
	}
	if err := k.UnmarshalWithConf("", out, koanf.UnmarshalConf{DecoderConfig: dc}); err != nil {
		return fmt.Errorf("config %s: %w", src, err)
	}
	return nil
}
