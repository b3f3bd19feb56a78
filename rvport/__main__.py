from rvport.cli.app import main

main()
