package imagebuild

import (
	"fmt"

	"github.com/spf13/cobra"
)

// Command returns the `image` command group for the bay binary:
//
//	bay image build [--flavour full|base|gull|bay] [--force] [--ship-binary PATH] [--mirror URL] [--packages FILE]...
//	bay image tags  [--flavour full|base|gull|bay] [--ship-binary PATH] [--packages FILE]...
func Command() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Build the sandbox image locally from Debian packages (no registry needed)",
	}
	cmd.AddCommand(buildCommand(), tagsCommand())
	return cmd
}

func buildCommand() *cobra.Command {
	var (
		opts    Options
		flavour string
		all     bool
	)
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build the ship sandbox image (mmdebstrap + Docker Engine API import)",
		Long: `Build the sandbox image without a registry: mmdebstrap builds a Debian root
filesystem (package lists in image/packages), the Docker engine imports it, and a
classic ImageBuild step adds the static ship binary, the built-in skills and the
runtime configuration (user 1000:1000, /workspace, port 8123).

Images are tagged by content (ship:<flavour>-<hash>); an unchanged recipe and ship
binary are not rebuilt, and a new ship binary only re-runs the fast last step.
The full flavour is tagged ship:latest, the base flavour ship:base. The gull flavour
(gull:latest) is the browser runtime: headless Chromium, fonts and bin/gull instead of
ship, Python and Node. The bay flavour (bay:latest) is the control plane itself for
Kubernetes and docker-compose: bin/bay-static (CGO_ENABLED=0; make image-bay) on tini,
certificates and nft.

Extra Debian packages: --packages FILE (repeatable) names a list like
image/packages/*.txt, one package per line, # comments; they are installed with the
flavour's and change the content tags. Give such an image its own --tag
(e.g. ship:custom) and name it in a profile; a build with --packages removes no
other image of the flavour.

Security updates: the Debian archive is not part of the content tag, so an
unchanged recipe is not rebuilt on its own. Run the same command with --force
to download the current packages (trixie-security included), then restart
sandboxes (bay uses the tag's new image for new sessions).

Needs: mmdebstrap (apt-get install mmdebstrap), root (or user namespaces), a
reachable Docker engine, the Debian archive, and bin/ship (make build).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SilenceUsage = true
			opts.Progress = cmd.OutOrStdout()
			flavours := []Flavour{Flavour(flavour)}
			if all {
				flavours = []Flavour{FlavourBase, FlavourFull}
				if opts.Tag != "" {
					return fmt.Errorf("--tag cannot be used with --all")
				}
			}
			for _, f := range flavours {
				o := opts
				o.Flavour = f
				if _, err := Build(cmd.Context(), o); err != nil {
					return err
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&flavour, "flavour", string(FlavourFull), "image flavour: full (ship:latest), base (ship:base), gull (gull:latest) or bay (bay:latest, the control plane)")
	f.BoolVar(&all, "all", false, "build both flavours")
	f.BoolVar(&opts.Force, "force", false, "rebuild even if an image with the same content tag exists (re-downloads all packages)")
	f.StringVar(&opts.ShipBinary, "ship-binary", "", "static runtime binary to put into the image (make build; default "+DefaultShipBinary+", "+DefaultGullBinary+" for the gull flavour, "+DefaultBayBinary+" for the bay flavour)")
	f.StringVar(&opts.Mirror, "mirror", "", "Debian archive URL (default: the host's apt sources, else "+DefaultMirror+")")
	f.StringVar(&opts.SecurityMirror, "security-mirror", "", `Debian security archive URL, or "none" (default: the host's apt sources unless --mirror is given)`)
	f.StringVar(&opts.Tag, "tag", "", "friendly tag to point at the image (default ship:latest for full, ship:base for base)")
	f.BoolVar(&opts.KeepOld, "keep-old", false, "keep older images of the flavour instead of removing their tags")
	f.BoolVarP(&opts.Verbose, "verbose", "v", false, "show all apt/dpkg output of mmdebstrap")
	f.StringArrayVar(&opts.PackageFiles, "packages", nil, packagesFlagUsage)
	return cmd
}

const packagesFlagUsage = "file listing extra Debian packages, one per line (repeatable; they change the content tags)"

func tagsCommand() *cobra.Command {
	var (
		opts    Options
		flavour string
	)
	cmd := &cobra.Command{
		Use:   "tags",
		Short: "Print the content tags the current recipe and ship binary would build (no engine needed)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SilenceUsage = true
			opts.Flavour = Flavour(flavour)
			p, err := NewPlan(opts)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "tag\t%s\ncontent\t%s\nrootfs\t%s\npackages\t%d\n", p.Tag, p.ContentTag, p.RootfsTag, len(p.Packages))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&flavour, "flavour", string(FlavourFull), "image flavour: full, base, gull or bay")
	f.StringVar(&opts.ShipBinary, "ship-binary", "", "static runtime binary (default "+DefaultShipBinary+", "+DefaultGullBinary+" for the gull flavour, "+DefaultBayBinary+" for the bay flavour)")
	f.StringArrayVar(&opts.PackageFiles, "packages", nil, packagesFlagUsage)
	return cmd
}
