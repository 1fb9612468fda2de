package sandbox

import (
	"sort"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
)

// ProfileList renders the configured profiles in config order (GET /v1/profiles). description
// and containers are filled only when detail is set.
func (s *Service) ProfileList(detail bool) *bayapi.ProfileList {
	out := &bayapi.ProfileList{Items: make([]bayapi.ProfileResponse, 0, len(s.cfg.Profiles))}
	for i := range s.cfg.Profiles {
		p := &s.cfg.Profiles[i]
		prim := p.Primary()
		r := bayapi.ProfileResponse{
			ID: p.ID, Image: prim.Image, Resources: resources(prim.Resources),
			Capabilities: p.Capabilities(), IdleTimeout: int(p.IdleTimeout.Seconds()),
		}
		if r.Capabilities == nil {
			r.Capabilities = []string{}
		}
		if detail {
			r.Description = p.Description
			r.Containers = make([]bayapi.ProfileContainer, 0, len(p.Containers))
			for _, c := range p.Containers {
				caps := append([]string{}, c.Capabilities...)
				sort.Strings(caps)
				r.Containers = append(r.Containers, bayapi.ProfileContainer{
					Name: c.Name, RuntimeType: c.RuntimeType, Capabilities: caps, Resources: resources(c.Resources),
				})
			}
		}
		out.Items = append(out.Items, r)
	}
	return out
}

func resources(r bay.Resources) bayapi.Resources {
	return bayapi.Resources{CPUs: r.CPUs, Memory: r.Memory}
}
