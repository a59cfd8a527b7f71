// Package konfig loads iop's YAML configuration files with koanf: the file
// first, then IOP_-prefixed environment overrides, decoded strictly into a
// plain struct (an unknown key is an error that names the key and the
// file). Validation of values belongs to the caller.
package konfig

import (
	"fmt"
	"os"
	"reflect"
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
	known := keysOf(reflect.TypeOf(out))
	envp := env.Provider(".", env.Opt{
		Prefix: EnvPrefix,
		TransformFunc: func(key, v string) (string, any) {
			// Only variables that name a configuration key are read: an
			// unrelated IOP_BIN or IOP_DEBUG in the environment is ignored,
			// not a configuration error.
			k := EnvKey(key)
			if !known.has(k) {
				return "", nil
			}
			return k, v
		},
	})
	if err := k.Load(envp, nil); err != nil {
		return fmt.Errorf("config environment: %w", err)
	}
	if err := k.UnmarshalWithConf("", out, koanf.UnmarshalConf{DecoderConfig: decoderConfig(out)}); err != nil {
		return fmt.Errorf("config %s: %w", src, err)
	}
	return nil
}

// decoderConfig is how every configuration section is decoded: durations
// and comma lists from strings, and an unknown key an error.
func decoderConfig(out any) *mapstructure.DecoderConfig {
	return &mapstructure.DecoderConfig{
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			mapstructure.StringToTimeDurationHookFunc(),
			mapstructure.StringToSliceHookFunc(","),
		),
		WeaklyTypedInput: true,
		ErrorUnused:      true,
		TagName:          "koanf",
		Result:           out,
	}
}

// Decode decodes a section already read (a map from Load, such as the
// node section of an all-in-one gateway file) into out, as Load would.
func Decode(section map[string]any, out any) error {
	d, err := mapstructure.NewDecoder(decoderConfig(out))
	if err != nil {
		return err
	}
	return d.Decode(section)
}

// keySet holds a struct's configuration keys: exact keys, and prefixes
// under which any key is accepted (maps and lists).
type keySet struct {
	exact, open map[string]bool
}

func (k keySet) has(key string) bool {
	if k.exact[key] {
		return true
	}
	for p := range k.open {
		if strings.HasPrefix(key, p+".") {
			return true
		}
	}
	return false
}

// keysOf lists the koanf keys of a struct type (through pointers).
func keysOf(t reflect.Type) keySet {
	ks := keySet{exact: map[string]bool{}, open: map[string]bool{}}
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("koanf")
			if tag == "" || tag == "-" {
				continue
			}
			key := prefix + tag
			ks.exact[key] = true
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch ft.Kind() {
			case reflect.Struct:
				if ft.String() != "time.Duration" {
					walk(ft, key+".")
				}
			case reflect.Map, reflect.Slice:
				ks.open[key] = true
			}
		}
	}
	walk(t, "")
	return ks
}
