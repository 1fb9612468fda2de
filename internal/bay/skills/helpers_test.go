package skills

import (
	"errors"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

type bayapiProblem = bay.SkillProblem

func asErr[T error](err error, target *T) bool { return errors.As(err, target) }
