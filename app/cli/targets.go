package cli

import (
	"errors"
	"sort"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/app/config"
	"github.com/delayq/delayq/jobs/httptarget"
)

// newTargets builds the built-in handler of every topic with a target
// (worker.topics.<t>.target): no Go code, the job goes to the endpoint
// (docs/design.md §4.12). builtin are the topics with a handler of the
// program's own, which cannot have a target too. The secrets are read
// from the environment (lookup) here, once; a variable the configuration
// names and the environment lacks is a configuration error naming it.
func newTargets(cfg config.Config, log logrus.FieldLogger, obs httptarget.Observer, version string,
	builtin func(topic string) bool, lookup func(string) (string, bool)) (map[string]*httptarget.Target, error) {
	wc := cfg.Worker
	names := make([]string, 0, len(wc.Topics))
	for name, t := range wc.Topics {
		if t.Target != nil {
			names = append(names, name)
		}
	}
	sort.Strings(names) // the same error first on every start
	out := make(map[string]*httptarget.Target, len(names))
	var errs []error
	for _, name := range names {
		t := wc.Topics[name]
		key := "worker.topics." + name + ".target"
		if builtin(name) {
			errs = append(errs, &config.Error{Key: key, Value: t.Target.URL, Reason: name + " has a built-in handler: a target cannot replace it"})
			continue
		}
		var secret []byte
		if env := t.Target.SecretEnv; env != "" {
			v, ok := lookup(env)
			if !ok || v == "" {
				errs = append(errs, &config.Error{Key: key + ".secret_env", Value: env, Reason: "the environment variable " + env + " is not set (or empty)"})
				continue
			}
			secret = []byte(v)
		}
		hc := t.Target.HTTPTarget(secret, wc.TargetAllowHosts)
		eff := wc.TopicSettings(name)
		hc.Concurrency, hc.RetryAfterCap = eff.Concurrency, eff.BackoffCap
		hc.Version = version
		hc.Observer = obs
		hc.Logger = log.WithField("topic", name)
		tg, err := httptarget.New(hc)
		if err != nil {
			errs = append(errs, targetConfigError(key, err))
			continue
		}
		out[name] = tg
		log.WithFields(logrus.Fields{"topic": name, "target": tg.URL(), "method": tg.Method(), "signed": secret != nil}).
			Info("HTTP target topic")
	}
	if len(errs) > 0 {
		for _, tg := range out {
			tg.Close()
		}
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// targetConfigError names the configuration key of a target's setting
// (Config.Validate has checked all but the CA file, which New reads).
func targetConfigError(key string, err error) error {
	var ce *httptarget.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	return &config.Error{Key: key + "." + ce.Field, Value: ce.Value, Reason: ce.Reason}
}
