from sessiontool.cli.main import main

main()
