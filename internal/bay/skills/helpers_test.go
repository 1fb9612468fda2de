package skills

import (
	"errors"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

type bayapiProblem = bayapi.SkillProblem

func asErr[T error](err error, target *T) bool { return errors.As(err, target) }
