from dragoman.cli import main

raise SystemExit(main())
