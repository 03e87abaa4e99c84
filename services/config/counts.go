package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// negativeCounts refuses every count, size and bound below zero, by key:
// zero (or the key left out) takes a key's default, while a negative one
// took it silently too (aggregator.pageSize: -1 served the default page),
// hiding a typo or an expansion gone wrong; a negative duration is
// refused while decoding (Duration). One walk over the decoded file, so
// a key added later is covered as well.
func negativeCounts(v reflect.Value, path string) error {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return negativeCounts(v.Elem(), path)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if v.Type() != reflect.TypeFor[Duration]() && v.Int() < 0 {
			return keyErr(path, "is negative: give 0 or more (0, or none, takes the default)")
		}
	case reflect.Slice:
		var errs []error
		for i := range v.Len() {
			errs = append(errs, negativeCounts(v.Index(i), fmt.Sprintf("%s[%d]", path, i)))
		}
		return errors.Join(errs...)
	case reflect.Struct:
		var errs []error
		for i := range v.NumField() {
			f := v.Type().Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			key := name
			switch {
			case name == "":
				key = path // an inlined section
			case path != "":
				key = path + "." + name
			}
			errs = append(errs, negativeCounts(v.Field(i), key))
		}
		return errors.Join(errs...)
	}
	return nil
}
