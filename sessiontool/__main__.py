from sessiontool.cli.app import main

main()
